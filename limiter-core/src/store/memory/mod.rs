//! The in-process store: the embedded default.
//!
//! Keys are spread over shards by hash, each shard behind its own mutex that
//! is held only for the few hundred nanoseconds of one decision, so there is
//! no global lock on the hot path. Each check hashes the key once and is O(1)
//! for the O(1) algorithms. State whose windows have all passed is swept from
//! a shard whenever the shard has doubled since its last sweep, so memory
//! follows the live keys, not every key ever seen.

mod shard;

use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use foldhash::fast::RandomState;

use crate::algorithm::bucket::{self, Pacing};
use crate::algorithm::sliding_log::{self, Log};
use crate::algorithm::{fixed_window, gcra, sliding_window};
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::error::Error;
use crate::policy::{Kind, Policy};
use crate::store::Store;
use shard::{Lookup, Shard, Tables};

/// Shards when none are asked for: enough that 2–64 cores rarely meet on one lock.
const DEFAULT_SHARDS: usize = 64;
/// The most keys a memory store holds unless told otherwise (11-19 MB of
/// state at 110-190 bytes per key; see BENCHMARKS.md).
pub const DEFAULT_CAPACITY: usize = 100_000;

/// The in-memory store: exact, concurrent and sharded, for one process.
///
/// Cheap to clone: clones share the same state.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{ManualClock, MemoryStore, Policy, Rule};
///
/// let clock = ManualClock::new(Duration::from_secs(1_000));
/// let store = MemoryStore::with_clock(clock.clone());
/// let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60))?])?;
/// assert!(store.check_now("k", &policy, 1)?.allowed());
/// assert!(store.check_now("k", &policy, 1)?.allowed());
/// let denied = store.check_now("k", &policy, 1)?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
/// clock.advance(Duration::from_secs(60));
/// assert!(store.check_now("k", &policy, 1)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MemoryStore<C = SystemClock> {
    inner: Arc<Inner<C>>,
}

struct Inner<C> {
    clock: C,
    /// Seeded per store, so nobody can choose keys that collide.
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
}

impl MemoryStore<SystemClock> {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }
}

impl Default for MemoryStore<SystemClock> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> MemoryStore<C> {
    /// A store reading time from `clock` (a [`ManualClock`](crate::ManualClock) in tests).
    pub fn with_clock(clock: C) -> Self {
        Self::with_clock_and_shards(clock, DEFAULT_SHARDS)
    }

    /// A store with `shards` shards (rounded up to a power of two, at least 1).
    pub fn with_clock_and_shards(clock: C, shards: usize) -> Self {
        let shards = shards.max(1).next_power_of_two();
        let capacity = DEFAULT_CAPACITY.div_ceil(shards);
        Self {
            inner: Arc::new(Inner {
                clock,
                hasher: RandomState::default(),
                shards: (0..shards)
                    .map(|_| Mutex::new(Shard::new(capacity)))
                    .collect(),
            }),
        }
    }

    /// At most `keys` keys hold state (default [`DEFAULT_CAPACITY`]). When a
    /// new key finds its shard full, keys whose windows have passed go first,
    /// then the least recently used eighth of the shard. An evicted key
    /// starts afresh: under a flood of distinct keys, memory stays bounded
    /// and the oldest idle keys lose their history.
    pub fn with_capacity(self, keys: usize) -> Self {
        let per_shard = keys.max(1).div_ceil(self.inner.shards.len());
        for shard in self.inner.shards.iter() {
            lock(shard).capacity = per_shard;
        }
        self
    }

    /// Checks a request now, synchronously: the memory store never waits.
    #[inline]
    pub fn check_now(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.check_at(key, policy, cost, self.inner.clock.now_micros())
    }

    /// Checks a request at `now` (microseconds since the Unix epoch) instead
    /// of the clock's time: for replaying traces and comparing stores.
    #[inline]
    pub fn check_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let hash = self.inner.hasher.hash_one(key);
        let at = Lookup {
            key,
            hash,
            now,
            hasher: &self.inner.hasher,
        };
        let quota = &policy.rules()[0];
        let mut shard = self.shard(hash);
        let decision = match policy.kind() {
            Kind::SlidingLog => shard.check(
                |t: &mut Tables| &mut t.logs,
                at,
                |log: &mut Option<Log>| {
                    let entries = log.get_or_insert_with(Log::new);
                    let decision = sliding_log::check(entries, policy.rules(), now, cost);
                    if entries.is_empty() {
                        *log = None;
                    }
                    decision
                },
            ),
            Kind::FixedWindow => shard.check(
                |t: &mut Tables| &mut t.windows,
                at,
                |w| fixed_window::check(w, quota, now, cost),
            ),
            Kind::SlidingWindow => shard.check(
                |t: &mut Tables| &mut t.counters,
                at,
                |c| sliding_window::check(c, quota, now, cost),
            ),
            Kind::TokenBucket(params) => shard.check(
                |t: &mut Tables| &mut t.buckets,
                at,
                |l| bucket::check(l, &params, quota, now, cost, Pacing::Off),
            ),
            Kind::LeakyBucket(params) => shard.check(
                |t: &mut Tables| &mut t.buckets,
                at,
                |l| bucket::check(l, &params, quota, now, cost, Pacing::On),
            ),
            Kind::Gcra(params) => shard.check(
                |t: &mut Tables| &mut t.gcra,
                at,
                |t| gcra::check(t, &params, quota, now, cost),
            ),
        };
        drop(shard);
        Ok(decision)
    }

    /// How many keys hold state, including state not yet swept.
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no key holds state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every key whose windows have passed, in every shard.
    pub fn sweep(&self) {
        let now = self.inner.clock.now_micros();
        for shard in self.inner.shards.iter() {
            lock(shard).sweep(now);
        }
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // The low bits choose the bucket inside a shard's table; use the high ones here.
        let index = (hash >> 40) as usize & (self.inner.shards.len() - 1);
        lock(&self.inner.shards[index])
    }
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic while holding a shard cannot leave it half-written (every
    // update is a plain assignment after the decision), so poison is ignored.
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<C: Clock> Store for MemoryStore<C> {
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.check_now(key, policy, cost)
    }

    fn try_check_now(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        Some(self.check_now(key, policy, cost))
    }

    fn is_remote(&self) -> bool {
        false
    }
}

impl<C> Clone for MemoryStore<C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C> fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::shard::MIN_SWEEP_LEN;
    use super::*;
    use crate::{ManualClock, Rate, Rule};

    #[test]
    fn keys_whose_windows_passed_are_swept_as_new_keys_arrive() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let store = MemoryStore::with_clock_and_shards(clock.clone(), 1);
        // One request's GCRA state lasts one emission interval (100 ms).
        let policy = Policy::gcra(Rate::per_second(10).unwrap(), 5).unwrap();
        let check = |key: String| assert!(store.check_now(&key, &policy, 1).unwrap().allowed());
        (0..MIN_SWEEP_LEN).for_each(|i| check(format!("old{i}")));
        assert_eq!(store.len(), MIN_SWEEP_LEN);
        clock.advance(Duration::from_millis(100));
        // The shard is at its sweep length: the next new key sweeps it first.
        check("new0".into());
        assert_eq!(store.len(), 1);
        // Live keys are not swept: the shard grows past its sweep length.
        (1..=MIN_SWEEP_LEN).for_each(|i| check(format!("new{i}")));
        assert_eq!(store.len(), MIN_SWEEP_LEN + 1);
        clock.advance(Duration::from_millis(100));
        store.sweep();
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn a_full_store_evicts_expired_keys_first_then_the_least_recently_used() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(80);
        let short = Policy::fixed_window(Rule::new(5, Duration::from_secs(1)).unwrap());
        let long = Policy::fixed_window(Rule::new(5, Duration::from_secs(3600)).unwrap());
        for i in 0..40 {
            store.check_now(&format!("short{i}"), &short, 1).unwrap();
        }
        for i in 0..40 {
            clock.advance(Duration::from_millis(1));
            store.check_now(&format!("long{i}"), &long, 1).unwrap();
        }
        assert_eq!(store.len(), 80);
        // The short windows have passed: they make room first.
        clock.advance(Duration::from_secs(2));
        store.check_now("new0", &long, 1).unwrap();
        assert_eq!(store.len(), 41);
        for i in 1..40 {
            store.check_now(&format!("new{i}"), &long, 1).unwrap();
        }
        // Touch long0 so it is recent; the next new key evicts the oldest eighth
        // of 80 (long1..long10), not long0.
        store.check_now("long0", &long, 1).unwrap();
        store.check_now("newest", &long, 1).unwrap();
        assert_eq!(store.len(), 71);
        assert_eq!(store.check_now("long0", &long, 1).unwrap().remaining(), 2);
        assert_eq!(
            store.check_now("long1", &long, 1).unwrap().remaining(),
            4,
            "evicted: starts afresh"
        );
        assert_eq!(
            store.check_now("long11", &long, 1).unwrap().remaining(),
            3,
            "kept"
        );
    }

    #[test]
    fn eviction_picks_the_least_recently_used_over_every_kind_of_state() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let store = MemoryStore::with_clock_and_shards(clock, 1).with_capacity(16);
        let gcra = Policy::gcra(Rate::per_second(1).unwrap(), 10).unwrap();
        let window = Policy::fixed_window(Rule::new(10, Duration::from_secs(3600)).unwrap());
        let remaining =
            |key: &str, policy: &Policy| store.check_now(key, policy, 1).unwrap().remaining();
        // Oldest first: window0..7, then gcra0..7; then window0 is used again.
        for i in 0..8 {
            assert_eq!(remaining(&format!("window{i}"), &window), 9);
        }
        for i in 0..8 {
            assert_eq!(remaining(&format!("gcra{i}"), &gcra), 9);
        }
        assert_eq!(remaining("window0", &window), 8);
        // Full: the next key evicts the least recently used eighth (2 keys),
        // window1 and window2, whatever table they are in.
        assert_eq!(remaining("new", &gcra), 9);
        assert_eq!(store.len(), 15);
        assert_eq!(remaining("window0", &window), 7, "kept");
        assert_eq!(remaining("window3", &window), 8, "kept");
        assert_eq!(remaining("gcra0", &gcra), 8, "kept");
        assert_eq!(remaining("window1", &window), 9, "evicted: starts afresh");
    }

    #[test]
    fn a_key_reused_with_another_algorithm_starts_fresh() {
        let store = MemoryStore::with_clock(ManualClock::new(Duration::from_secs(1)));
        let log = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
        let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 3).unwrap();
        assert!(store.check_now("k", &log, 1).unwrap().allowed());
        assert_eq!(store.check_now("k", &bucket, 1).unwrap().remaining(), 2);
        assert_eq!(store.len(), 1);
    }
}
