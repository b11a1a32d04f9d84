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

impl crate::Policy {
    /// The same policy, leased: each instance takes up to `lease.max()`
    /// permits of a hot key in one call and hands them out locally until
    /// they are spent or the lease ends, then gives back the rest. A key
    /// with fewer than two requests per lease length goes to the store
    /// directly. Exact: across all instances, never more admitted than the
    /// policy allows, in any window.
    ///
    /// For the sliding log and the fixed window only: a leased entry of
    /// the log counts as made at the lease's end, so it never leaves a
    /// window before the request it stands for; a fixed window's lease
    /// ends with its window. (A bucket's tokens taken early would refill
    /// the bucket early: up to `rate × ttl` more than it allows.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Lease, Policy, Rate, Rule};
    ///
    /// let trending = Policy::sliding_log([Rule::new(1000, Duration::from_secs(1))?])?
    ///     .with_lease(Lease::new(50, Duration::from_millis(100))?)?;
    /// assert_eq!(trending.hot_key().unwrap().name(), "lease");
    ///
    /// let bucket = Policy::token_bucket(Rate::per_second(10)?, 10)?;
    /// assert_eq!(
    ///     bucket.with_lease(Lease::up_to(5)?).unwrap_err().to_string(),
    ///     "invalid lease: leases work with sliding_log and fixed_window, not token_bucket"
    /// );
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn with_lease(self, lease: Lease) -> Result<Self, ConfigError> {
        use crate::Algorithm::{FixedWindow, SlidingLog};
        if !matches!(self.algorithm(), SlidingLog | FixedWindow) {
            return Err(invalid(
                "lease",
                format!(
                    "leases work with sliding_log and fixed_window, not {}",
                    self.algorithm()
                ),
            ));
        }
        self.with_hot(HotKey::Lease(lease))
    }

    /// The same policy over `shards` sub-keys of each key, each holding
    /// `1/shards` of every limit (rounded down: never more than the limit in
    /// total), which requests take in turn. On a Redis Cluster whose slots
    /// are split evenly (as `redis-cli --cluster create` splits them) with
    /// at least `shards` primaries, the sub-keys sit on different
    /// primaries. Refused when a limit, capacity or burst is below
    /// `shards`, or the cost above a shard's share.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Policy, Rule};
    ///
    /// let policy = Policy::fixed_window(Rule::new(1000, Duration::from_secs(1))?);
    /// assert!(policy.clone().with_shards(3).is_ok());
    /// let small = Policy::fixed_window(Rule::new(2, Duration::from_secs(1))?);
    /// assert_eq!(
    ///     small.with_shards(3).unwrap_err().to_string(),
    ///     "invalid shard: a limit of 2 cannot be split into 3 shards"
    /// );
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn with_shards(self, shards: u32) -> Result<Self, ConfigError> {
        if !(2..=MAX_SHARDS).contains(&shards) {
            return Err(invalid(
                "shard",
                format!("a key splits into 2 to {MAX_SHARDS} shards, got {shards}"),
            ));
        }
        let smallest = self.smallest_limit();
        if smallest < u64::from(shards) {
            return Err(invalid(
                "shard",
                format!("a limit of {smallest} cannot be split into {shards} shards"),
            ));
        }
        let share = self.divided(shards);
        if self.cost() > share.largest_cost() {
            return Err(invalid(
                "shard",
                format!(
                    "a cost of {} exceeds a shard's share of {}",
                    self.cost(),
                    share.largest_cost()
                ),
            ));
        }
        self.with_hot(HotKey::Shard { shards })
    }

    /// The same policy, sampled: an instance checks one request of a key in
    /// `every` with `every` times its cost, and decides the next `every - 1`
    /// as that one was decided (a denial only until its retry time). An
    /// instance admits at most `every - 1` requests more per window than
    /// the policy allows. Refused when `every` times the cost could never
    /// pass.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Policy, Rule};
    ///
    /// let views = Policy::sliding_window(Rule::new(10_000, Duration::from_secs(1))?)
    ///     .with_sampling(10)?;
    /// assert_eq!(views.hot_key().unwrap().name(), "sample");
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn with_sampling(self, every: u32) -> Result<Self, ConfigError> {
        if !(2..=MAX_SAMPLING).contains(&every) {
            return Err(invalid(
                "sample",
                format!("one request in 2 to {MAX_SAMPLING} is sampled, got {every}"),
            ));
        }
        let weight = self.cost().saturating_mul(u64::from(every));
        if weight > self.largest_cost() {
            return Err(invalid(
                "sample",
                format!(
                    "a sampled request weighs {weight}, more than the policy's {} can pass",
                    self.largest_cost()
                ),
            ));
        }
        self.with_hot(HotKey::Sample { every })
    }

    fn with_hot(mut self, mode: HotKey) -> Result<Self, ConfigError> {
        if let Some(set) = self.hot.filter(|set| set.name() != mode.name()) {
            return Err(invalid(
                mode.name(),
                format!(
                    "the policy is already in {} mode: one mode per policy",
                    set.name()
                ),
            ));
        }
        self.hot = Some(mode);
        Ok(self)
    }

    fn smallest_limit(&self) -> u64 {
        self.rules().iter().map(|r| r.limit()).min().unwrap_or(1)
    }
}
