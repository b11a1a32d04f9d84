//! [`HotKeys`]: the per-instance state of the hot-key modes, and the check
//! that honours a policy's mode.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::{Clock, ManualClock, SystemClock};
use crate::decision::Decision;
use crate::error::Error;
use crate::policy::Policy;
use crate::store::{Store, ask};
use crate::verdict::{OnStoreError, Verdict};

use super::HotKey;
use super::lease::Leases;
use super::sample::Samples;

/// The most keys whose lease or sampling state an instance keeps: past it,
/// keys idle for a lease's length are dropped, and a new key goes to the
/// store directly (exact) while none is idle.
pub(crate) const MAX_TRACKED_KEYS: usize = 65_536;

/// How often a full table of keys may be swept for keys to forget: a flood
/// of distinct keys that keeps it full costs one sweep per interval, not a
/// sweep of every key per request.
const SWEEP_INTERVAL_US: u64 = 100_000;

/// When a full table of keys may next be swept.
#[derive(Debug, Default)]
pub(crate) struct SweepGate {
    next: std::sync::atomic::AtomicU64,
    #[cfg(test)]
    pub(crate) sweeps: std::sync::atomic::AtomicU64,
}

impl SweepGate {
    /// Whether a sweep may run at `now` (µs); if so, the next may run an
    /// interval later.
    pub(crate) fn due(&self, now: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let next = self.next.load(Relaxed);
        let due = now >= next
            && self
                .next
                .compare_exchange(next, now + SWEEP_INTERVAL_US, Relaxed, Relaxed)
                .is_ok();
        #[cfg(test)]
        if due {
            self.sweeps.fetch_add(1, Relaxed);
        }
        due
    }
}

/// The state one instance keeps for the hot-key modes of its policies
/// ([`HotKey`]): its leases, its sampling counters, its turn among shards.
///
/// A [`Limiter`](crate::Limiter) and the Tower layer each hold one; clones
/// share it. A policy without a mode goes to the store as it would without
/// it.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use limiter_core::{HotKeys, Lease, MemoryStore, Policy, Rule};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let hot = HotKeys::new();
/// let store = Arc::new(MemoryStore::new());
/// let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(1))?])?
///     .with_lease(Lease::up_to(50)?)?;
/// // The memory store decides in process: a lease would gain nothing.
/// assert!(hot.check(&store, "trending", &policy, 1).await?.allowed());
/// assert!(hot.check(&store, "trending", &policy, 1).await?.allowed());
/// assert!(!hot.check(&store, "trending", &policy, 1).await?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct HotKeys {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) clock: HotClock,
    /// The store decides at this instance's clock (tests only).
    pub(crate) store_time: bool,
    pub(crate) leases: Leases,
    pub(crate) samples: Samples,
    pub(crate) turn: AtomicU64,
    /// Lease ids: unique per instance (random start), then counted up.
    next_id: AtomicU64,
}

/// The clock of the leases: the system's, or a test's.
#[derive(Clone)]
pub(crate) enum HotClock {
    System,
    Manual(ManualClock),
}

impl HotClock {
    pub(crate) fn now(&self) -> u64 {
        match self {
            Self::System => SystemClock.now_micros(),
            Self::Manual(clock) => clock.now_micros(),
        }
    }

    pub(crate) async fn sleep_until(&self, micros: u64) {
        match self {
            Self::System => SystemClock.sleep_until(micros).await,
            Self::Manual(clock) => clock.sleep_until(micros).await,
        }
    }
}

impl Default for HotKeys {
    fn default() -> Self {
        Self::new()
    }
}

impl HotKeys {
    /// State on the system clock.
    pub fn new() -> Self {
        Self::with(HotClock::System, false)
    }

    /// State on `clock`: when leases end, when a rate is measured.
    pub fn with_clock(clock: ManualClock) -> Self {
        Self::with(HotClock::Manual(clock), false)
    }

    /// State on `clock` whose leases the Redis store also takes at that
    /// clock's time instead of its own. For tests that count admissions per
    /// window exactly, only.
    #[cfg(feature = "test-util")]
    pub fn with_store_time(clock: ManualClock) -> Self {
        Self::with(HotClock::Manual(clock), true)
    }

    fn with(clock: HotClock, store_time: bool) -> Self {
        // A random start: instances must not share lease ids.
        let seed = foldhash::fast::RandomState::default().hash_one(SystemClock.now_micros());
        Self {
            shared: Arc::new(Shared {
                clock,
                store_time,
                leases: Leases::default(),
                samples: Samples::default(),
                turn: AtomicU64::new(0),
                next_id: AtomicU64::new(seed >> 16),
            }),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Checks a request of `cost` on `key` as [`ask::verdict`](crate::ask::verdict)
    /// does, honouring the policy's hot-key mode. `on_error` is the failure
    /// policy a guarded store applies when a lease cannot be taken.
    pub async fn check_verdict<S: Store>(
        &self,
        store: &Arc<S>,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> Result<Verdict, Error> {
        match policy.hot_key() {
            None => ask::verdict(&**store, key, policy, cost, on_error).await,
            Some(HotKey::Lease(lease))
                if S::CAPABILITIES.is_remote() && S::CAPABILITIES.has_leases() =>
            {
                super::lease::check(self, store, key, policy, lease, cost, on_error).await
            }
            // In process a lease would gain nothing: the store decides at
            // once; a store that leases nothing decides each check itself.
            Some(HotKey::Lease(_)) => ask::verdict(&**store, key, policy, cost, on_error).await,
            Some(HotKey::Shard { shards }) => {
                super::shard::check(self, store, key, policy, shards, cost, on_error).await
            }
            Some(HotKey::Sample { every }) => {
                super::sample::check(self, store, key, policy, every, cost, on_error).await
            }
        }
    }

    /// Checks like [`check_verdict`](Self::check_verdict), answering a
    /// decision as [`Store::check`] does: a store that failed open answers an
    /// allowed decision with every quota remaining, one that failed closed
    /// [`Error::Unavailable`].
    pub async fn check<S: Store>(
        &self,
        store: &Arc<S>,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        match self.check_verdict(store, key, policy, cost, None).await? {
            Verdict::Store(d) | Verdict::Cached(d) | Verdict::Fallback(d) => Ok(d),
            Verdict::FailedOpen => Ok(Decision::unchecked(policy)),
            Verdict::FailedClosed { retry_after } => Err(Error::Unavailable(retry_after)),
        }
    }
}

impl fmt::Debug for HotKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HotKeys")
            .field("leased_keys", &self.shared.leases.len())
            .finish_non_exhaustive()
    }
}
