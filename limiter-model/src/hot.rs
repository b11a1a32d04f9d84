//! The hot-key modes a policy can opt into: what they are and their
//! parameters, checked when the policy is built (no runtime needed, so the
//! `#[rate_limit]` macro checks them at compile time).

use std::time::Duration;

use crate::error::ConfigError;

/// The lease length unless told otherwise: 100 ms.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_millis(100);
/// The most permits one lease takes.
pub const MAX_LEASE: u64 = 1000;
/// The longest lease: 10 s.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(10);
/// The most sub-keys a key is split into.
pub const MAX_SHARDS: u32 = 64;
/// The longest sampling period: one request in 1,000 is checked.
pub const MAX_SAMPLING: u32 = 1000;

/// How many permits of a key an instance may take at once, and for how
/// long it may hand them out locally (see [`HotKey::Lease`]).
///
/// ```
/// use std::time::Duration;
/// use limiter_core::Lease;
///
/// let lease = Lease::new(50, Duration::from_millis(100))?;
/// assert_eq!((lease.max(), lease.ttl()), (50, Duration::from_millis(100)));
/// assert_eq!(
///     Lease::new(1, Duration::from_millis(100)).unwrap_err().to_string(),
///     "invalid lease: a lease holds 2 to 1000 permits, got 1"
/// );
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    max: u64,
    ttl_us: u64,
}

impl Lease {
    /// At most `max` permits (2 to [`MAX_LEASE`]) per lease, each lease
    /// lasting `ttl` (1 ms to [`MAX_LEASE_TTL`]).
    pub fn new(max: u64, ttl: Duration) -> Result<Self, ConfigError> {
        if !(2..=MAX_LEASE).contains(&max) {
            return Err(invalid(
                "lease",
                format!("a lease holds 2 to {MAX_LEASE} permits, got {max}"),
            ));
        }
        if ttl < Duration::from_millis(1) || ttl > MAX_LEASE_TTL {
            return Err(invalid(
                "lease",
                format!("a lease lasts 1ms to 10s, got {ttl:?}"),
            ));
        }
        Ok(Self {
            max,
            ttl_us: ttl.as_micros() as u64,
        })
    }

    /// At most `max` permits per lease, for [`DEFAULT_LEASE_TTL`].
    pub fn up_to(max: u64) -> Result<Self, ConfigError> {
        Self::new(max, DEFAULT_LEASE_TTL)
    }

    /// The most permits one lease takes.
    pub const fn max(&self) -> u64 {
        self.max
    }

    /// How long a lease lasts.
    pub const fn ttl(&self) -> Duration {
        Duration::from_micros(self.ttl_us)
    }

    /// How long a lease lasts, in µs.
    pub const fn ttl_us(&self) -> u64 {
        self.ttl_us
    }
}

/// A way to take load off the one Redis thread that owns a hot key, opted
/// into per policy with [`Policy::with_lease`](crate::Policy::with_lease),
/// [`with_shards`](crate::Policy::with_shards) or
/// [`with_sampling`](crate::Policy::with_sampling). A policy has at most one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HotKey {
    /// Each instance takes up to [`Lease::max`] permits in one call and
    /// hands them out locally until spent or the lease ends. Exact: never
    /// more admitted than the policy allows, in any window.
    Lease(Lease),
    /// The key is split into `shards` sub-keys, each with `1/shards` of the
    /// limit, on different cluster nodes. Never more than the limit in
    /// total; may deny while another shard has room.
    Shard {
        /// How many sub-keys.
        shards: u32,
    },
    /// An instance checks one request in `every` with a weight of `every`
    /// and decides the others as that one was decided. At most `every - 1`
    /// extra requests per instance and window.
    Sample {
        /// One request in how many is checked.
        every: u32,
    },
}

impl HotKey {
    /// The mode's name: `lease`, `shard` or `sample`.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Lease(_) => "lease",
            Self::Shard { .. } => "shard",
            Self::Sample { .. } => "sample",
        }
    }
}

pub(crate) fn invalid(mode: &'static str, reason: String) -> ConfigError {
    ConfigError::InvalidHotKey { mode, reason }
}
