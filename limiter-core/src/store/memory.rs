//! The in-process store: the embedded default.
//!
//! Keys are spread over shards by hash, each shard behind its own mutex that
//! is held only for the few hundred nanoseconds of one decision, so there is
//! no global lock on the hot path. Each check hashes the key once and is O(1)
//! for the O(1) algorithms. State whose windows have all passed is swept from
//! a shard whenever the shard has doubled since its last sweep, so memory
//! follows the live keys, not every key ever seen.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;

use crate::algorithm::Micros;
use crate::algorithm::bucket::{self, Level, Pacing};
use crate::algorithm::fixed_window::{self, Window};
use crate::algorithm::gcra;
use crate::algorithm::sliding_log::{self, Log};
use crate::algorithm::sliding_window::{self, Counters};
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::error::Error;
use crate::policy::{Kind, Policy};
use crate::store::Store;

/// Shards when none are asked for: enough that 2–64 cores rarely meet on one lock.
const DEFAULT_SHARDS: usize = 64;
/// The most keys a memory store holds unless told otherwise (15-20 MB of
/// state at 150-200 bytes per key; see BENCHMARKS.md).
pub const DEFAULT_CAPACITY: usize = 100_000;
/// The gauge of keys holding state, over every memory store of the process
/// (including the fallback limiters of guarded stores).
const LIVE_KEYS: &str = "limiter_memory_store_keys";
/// A shard is not swept before it holds this many keys.
const MIN_SWEEP_LEN: usize = 64;

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
    hasher: foldhash::fast::FixedState,
    shards: Box<[Mutex<Shard>]>,
}

struct Shard {
    entries: HashTable<Entry>,
    sweep_at_len: usize,
    /// The most keys this shard holds.
    capacity: usize,
}

struct Entry {
    key: Box<str>,
    hash: u64,
    /// After this instant the state means the same as no state at all.
    expires_at: Micros,
    /// The last check of this key, for least-recently-used eviction.
    last_used: Micros,
    state: State,
}

enum State {
    SlidingLog(Log),
    FixedWindow(Window),
    SlidingWindow(Counters),
    Bucket(Level),
    Gcra(Micros),
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
                hasher: foldhash::fast::FixedState::default(),
                shards: (0..shards)
                    .map(|_| {
                        Mutex::new(Shard {
                            entries: HashTable::new(),
                            sweep_at_len: MIN_SWEEP_LEN,
                            capacity,
                        })
                    })
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
    pub fn check_now(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.check_at(key, policy, cost, self.inner.clock.now_micros())
    }

    /// Checks a request at `now` (microseconds since the Unix epoch) instead
    /// of the clock's time: for replaying traces and comparing stores.
    pub fn check_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let hash = self.inner.hasher.hash_one(key);
        let mut shard = self.shard(hash);
        if let Some(entry) = shard.entries.find_mut(hash, |e| &*e.key == key) {
            let (decision, replaced) = decide(Some(&mut entry.state), policy, now, cost);
            let changed = replaced.is_some();
            if let Some(state) = replaced {
                entry.state = state;
            }
            if changed || decision.allowed() {
                entry.expires_at = now + decision.reset_after_us();
            }
            entry.last_used = now;
            return Ok(decision);
        }
        let (decision, created) = decide(None, policy, now, cost);
        if let Some(state) = created {
            let entry = Entry {
                key: key.into(),
                hash,
                expires_at: now + decision.reset_after_us(),
                last_used: now,
                state,
            };
            shard.insert(entry, now);
        }
        Ok(decision)
    }

    /// How many keys hold state, including state not yet swept.
    pub fn len(&self) -> usize {
        self.inner
            .shards
            .iter()
            .map(|s| lock(s).entries.len())
            .sum()
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

impl Shard {
    fn insert(&mut self, entry: Entry, now: Micros) {
        if self.entries.len() >= self.sweep_at_len.min(self.capacity) {
            self.sweep(now);
        }
        if self.entries.len() >= self.capacity {
            self.evict_least_recently_used();
        }
        self.entries.insert_unique(entry.hash, entry, |e| e.hash);
        metrics::gauge!(LIVE_KEYS).increment(1.0);
    }

    /// Drops the least recently used eighth (at least one key); a batch, so
    /// the cost is amortized over the inserts that refill it.
    fn evict_least_recently_used(&mut self) {
        let mut last_used: Vec<Micros> = self.entries.iter().map(|e| e.last_used).collect();
        let batch = (last_used.len() / 8).max(1);
        let (_, &mut threshold, _) = last_used.select_nth_unstable(batch - 1);
        let mut evicted = 0;
        let before = self.entries.len();
        // Ties at the threshold go too, up to the batch size.
        self.entries.retain(|e| {
            let evict = e.last_used < threshold || (e.last_used == threshold && evicted < batch);
            evicted += usize::from(evict);
            !evict
        });
        metrics::gauge!(LIVE_KEYS).decrement((before - self.entries.len()) as f64);
    }

    fn sweep(&mut self, now: Micros) {
        let before = self.entries.len();
        self.entries.retain(|e| e.expires_at > now);
        self.sweep_at_len = (self.entries.len() * 2).max(MIN_SWEEP_LEN);
        metrics::gauge!(LIVE_KEYS).decrement((before - self.entries.len()) as f64);
    }
}

/// Runs the policy's algorithm on the key's state in place. Returns the
/// decision and, when the key had no state of this kind, the state to insert.
fn decide(
    existing: Option<&mut State>,
    policy: &Policy,
    now: Micros,
    cost: u64,
) -> (Decision, Option<State>) {
    let quota = &policy.rules()[0];
    macro_rules! run {
        ($variant:ident, |$state:ident| $call:expr) => {
            match existing {
                Some(State::$variant(s)) => {
                    let mut $state = Some(*s);
                    let decision = $call;
                    *s = $state.expect("state is only ever set");
                    (decision, None)
                }
                _ => {
                    let mut $state = None;
                    let decision = $call;
                    (decision, $state.map(State::$variant))
                }
            }
        };
    }
    match policy.kind() {
        Kind::SlidingLog => match existing {
            Some(State::SlidingLog(log)) => {
                (sliding_log::check(log, policy.rules(), now, cost), None)
            }
            _ => {
                let mut log = Log::new();
                let decision = sliding_log::check(&mut log, policy.rules(), now, cost);
                (
                    decision,
                    (!log.is_empty()).then_some(State::SlidingLog(log)),
                )
            }
        },
        Kind::FixedWindow => run!(FixedWindow, |w| fixed_window::check(
            &mut w, quota, now, cost
        )),
        Kind::SlidingWindow => run!(SlidingWindow, |c| sliding_window::check(
            &mut c, quota, now, cost
        )),
        Kind::TokenBucket(params) => run!(Bucket, |l| bucket::check(
            &mut l,
            &params,
            quota,
            now,
            cost,
            Pacing::Off
        )),
        Kind::LeakyBucket(params) => run!(Bucket, |l| bucket::check(
            &mut l,
            &params,
            quota,
            now,
            cost,
            Pacing::On
        )),
        Kind::Gcra(params) => run!(Gcra, |t| gcra::check(&mut t, &params, quota, now, cost)),
    }
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
    fn a_key_reused_with_another_algorithm_starts_fresh() {
        let store = MemoryStore::with_clock(ManualClock::new(Duration::from_secs(1)));
        let log = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
        let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 3).unwrap();
        assert!(store.check_now("k", &log, 1).unwrap().allowed());
        assert_eq!(store.check_now("k", &bucket, 1).unwrap().remaining(), 2);
        assert_eq!(store.len(), 1);
    }
}
