//! The in-process store: the embedded default.
//!
//! Keys are spread over shards by hash, each shard behind its own mutex that
//! is held only for the few hundred nanoseconds of one decision, so there is
//! no global lock on the hot path. Each check hashes the key once and is O(1)
//! for the O(1) algorithms. State whose windows have all passed is swept from
//! a shard whenever the shard has doubled since its last sweep, so memory
//! follows the live keys, not every key ever seen.
//!
//! The store holds at most a capacity of keys. A full shard evicts its least
//! recently used keys, but an evicted key's state is not forgotten while it
//! could still deny the key: it is remembered as a [ghost](ghost), exactly
//! by the key's hash, or (past four times the capacity) merged
//! conservatively with other evicted state, so a flood of distinct keys can
//! neither hand anyone a fresh quota nor take a new key's.

mod capabilities;
mod ghost;
#[cfg(test)]
mod ghost_props;
#[cfg(test)]
mod ghost_tests;
mod penalties;
mod permits;
#[cfg(test)]
mod remembered_tests;
mod shard;
#[cfg(test)]
mod tests;

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use foldhash::fast::RandomState;
use parking_lot::{Mutex, MutexGuard};

use crate::algorithm::bucket::{self, Pacing};
use crate::algorithm::sliding_log::{self, Log};
use crate::algorithm::{fixed_window, gcra, sliding_window};
use crate::backend::Kind;
use crate::clock::{Clock, SystemClock};
use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::store::{ControlTables, DEFAULT_MAX_PENALTY_BLOCKS, Store};
use crate::{Decision, Error, Key, Penalty, Policy, Receipt};
use penalties::Penalized;
use permits::Permits;
use shard::{Keys, Lookup, Run, Shard, Tables, on_option};
use std::time::Duration;

/// Shards when none are asked for: enough that 2–64 cores rarely meet on one lock.
const DEFAULT_SHARDS: usize = 64;
/// The most keys a memory store holds unless told otherwise (12-19 MB of
/// state at 120-190 bytes per key; once it evicts, up to four times as many
/// evicted keys remembered at 40-48 bytes each plus the table's slack, and
/// past those, 3.2-4.8 MB of coarse slots; see BENCHMARKS.md).
pub const DEFAULT_CAPACITY: usize = 100_000;

/// The in-memory store: exact, concurrent and sharded, for one process.
///
/// Cheap to clone: clones share the same state.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Key, ManualClock, MemoryStore, Policy, Rule};
///
/// let clock = ManualClock::new(Duration::from_secs(1_000));
/// let store = MemoryStore::with_clock(clock.clone());
/// let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60))?])?;
/// let key = Key::from("k");
/// assert!(store.check_now(&key, &policy, 1)?.allowed());
/// assert!(store.check_now(&key, &policy, 1)?.allowed());
/// let denied = store.check_now(&key, &policy, 1)?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
/// clock.advance(Duration::from_secs(60));
/// assert!(store.check_now(&key, &policy, 1)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MemoryStore<C = SystemClock> {
    inner: Arc<Inner<C>>,
}

struct Inner<C> {
    /// Shared with the control tables, which read it.
    clock: Arc<C>,
    /// Seeded per store, so nobody can choose keys that collide.
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
    /// How many keys hold state, and the most that may.
    keys: Arc<Keys>,
    /// The permits of concurrency limits, apart: none may be evicted.
    permits: Arc<Permits>,
    /// Blocks, plans and overrides, apart: none may be evicted.
    tables: ControlTables,
    /// Penalty states (see `penalties`).
    penalties: Penalized,
    /// The instances' reports (see [`SharedControl::publish_report`](crate::SharedControl::publish_report)).
    reports: crate::store::reports::Boards,
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
        let keys = Arc::new(Keys::new(DEFAULT_CAPACITY));
        let clock = Arc::new(clock);
        let read = Arc::clone(&clock);
        let tables = ControlTables::new(DEFAULT_MAX_PENALTY_BLOCKS, move || read.now_micros());
        Self {
            inner: Arc::new(Inner {
                clock,
                hasher: RandomState::default(),
                shards: (0..shards)
                    .map(|_| Mutex::new(Shard::new(capacity, Arc::clone(&keys))))
                    .collect(),
                keys,
                permits: Permits::new(),
                tables,
                penalties: Penalized::default(),
                reports: Default::default(),
            }),
        }
    }

    /// At most `keys` keys hold state (default [`DEFAULT_CAPACITY`]). When a
    /// new key finds the store full, keys whose windows have passed go
    /// first, then the least recently used eighth of the shard it falls
    /// into.
    ///
    /// Eviction never gives a key more than its limit, and a flood of other
    /// keys does not deny a key that was never evicted. The store remembers
    /// each evicted key whose state could still deny it by its 64-bit hash
    /// (seeded per store), exactly, up to four times the capacity (see
    /// [`remember_evicted`](Self::remember_evicted)): 40 bytes a key for GCRA
    /// and buckets, 32 for fixed windows, 48 for sliding windows and logs,
    /// plus a log's entries and the hash table's slack, allocated as keys
    /// are evicted. A key that returns gets exactly its state back; a key
    /// not remembered starts afresh.
    ///
    /// Only when more evicted keys are live (within their windows) than that
    /// does the store merge the ones that expire soonest into a coarse
    /// summary, one slot per key of capacity, chosen by hash; a slot holding
    /// one key's state gives it back exactly, a merged one denies at least
    /// what each state merged into it would, until the last of them expires.
    /// A key not remembered whose slot is merged inherits the merge: under a
    /// flood of more than five times the capacity of keys that each use
    /// their whole quota within one window, new keys can be denied their
    /// first requests until the flood's state expires (one window). A fixed
    /// window cannot keep its phase through a merge: it restarts at the key's
    /// return with the merge's count. BENCHMARKS.md measures both rates and
    /// the memory.
    ///
    /// The capacity is the store's, whatever shard its keys fall into: no
    /// key is evicted while fewer keys than the capacity hold state. A key
    /// that finds the store full but its shard empty, or checks adding keys
    /// in several shards at one instant, may take the store up to one key a
    /// shard past it. What evicted keys leave behind
    /// is divided among the store's shards (64 by default), and keys fall
    /// into shards by a hash seeded per process: a shard that draws more
    /// than its share of evicted keys merges sooner. The example uses one
    /// shard, so its counts are exact on every run.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Key, ManualClock, MemoryStore, Policy, Rule};
    ///
    /// let clock = ManualClock::new(Duration::from_secs(1_000));
    /// let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(64);
    /// let replies = Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?;
    /// let laoqian = Key::from("laoqian");
    /// for _ in 0..5 {
    ///     assert!(store.check_now(&laoqian, &replies, 1)?.allowed());
    /// }
    /// // 192 other users use their whole quota and evict "laoqian"...
    /// for i in 0..192 {
    ///     let user = Key::from(format!("user{i}"));
    ///     for _ in 0..5 {
    ///         store.check_now(&user, &replies, 1)?;
    ///     }
    /// }
    /// assert!(store.len() <= 64);
    /// // ...but cannot give it a fresh quota,
    /// let denied = store.check_now(&laoqian, &replies, 1)?;
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
    /// // nor take one from a user the store has never seen.
    /// assert_eq!(store.check_now(&Key::from("xiaoming"), &replies, 1)?.remaining(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacity(self, keys: usize) -> Self {
        let keys = keys.max(1);
        self.inner.keys.capacity.store(keys, Ordering::Relaxed);
        let per_shard = keys.div_ceil(self.inner.shards.len());
        for shard in self.inner.shards.iter() {
            lock(shard).capacity = per_shard;
        }
        self
    }

    /// Keeps at most `blocks` penalty-earned blocks (default
    /// [`DEFAULT_MAX_PENALTY_BLOCKS`](crate::DEFAULT_MAX_PENALTY_BLOCKS); at
    /// least 1): past it, the one that ends soonest gives way to the new
    /// one, so a flood of made-up identities earning blocks costs bounded
    /// memory and never stops a later offender from being blocked. Blocks
    /// set by an operator are bounded apart ([`MAX_BLOCKS`](crate::MAX_BLOCKS)),
    /// and never give way.
    ///
    /// ```
    /// use limiter_core::MemoryStore;
    ///
    /// let store = MemoryStore::new().with_max_penalty_blocks(20_000);
    /// ```
    pub fn with_max_penalty_blocks(self, blocks: usize) -> Self {
        self.inner.tables.blocks().set_max_penalty_blocks(blocks);
        self
    }

    /// Remembers up to `keys` evicted keys exactly (by default four times
    /// the capacity, set by [`with_capacity`](Self::with_capacity) unless
    /// this is called); a sliding log counts as one more key for every
    /// 16 of its entries, so the bound holds the memory too. Fewer save memory
    /// under a flood of distinct keys (40-48 bytes a key) at the price of
    /// merging evicted state sooner, which may deny new keys; `0` merges
    /// every evicted state at once.
    pub fn remember_evicted(self, keys: usize) -> Self {
        let per_shard = keys.div_ceil(self.inner.shards.len());
        for shard in self.inner.shards.iter() {
            lock(shard).remembered = Some(per_shard);
        }
        self
    }

    /// How many evicted keys are remembered exactly now, and the bytes
    /// their tables hold (not counting a sliding log's entries).
    pub fn remembered_evicted(&self) -> (usize, usize) {
        let shards = self.inner.shards.iter();
        shards.fold((0, 0), |(keys, bytes), shard| {
            let (k, b) = lock(shard).remembered();
            (keys + k, bytes + b)
        })
    }

    /// Checks a request now, synchronously: the memory store never waits.
    #[inline]
    pub fn check_now(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.check_at(key, policy, cost, self.inner.clock.now_micros())
    }

    /// Checks a request at `now` (microseconds since the Unix epoch) instead
    /// of the clock's time: for the guard's fallback and tests in this crate.
    #[inline]
    pub(crate) fn check_at(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.decide_at(key, policy, cost, now, Record::Yes)
    }

    #[inline(always)]
    fn decide_at(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
        now: u64,
        record: Record,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let key = key.as_str();
        let hash = self.inner.hasher.hash_one(key);
        let at = Lookup {
            key,
            hash,
            now,
            hasher: &self.inner.hasher,
        };
        let quota = &policy.rules()[0];
        let mut shard = self.shard(hash);
        // Built in the return slot: a 128-byte decision is not moved again.
        Ok(match policy.kind() {
            Kind::SlidingLog => shard.check(
                |t: &mut Tables| &mut t.logs,
                at,
                |merged, expires_at| {
                    Some(sliding_log::inherit(
                        merged,
                        expires_at,
                        policy.rules(),
                        now,
                    ))
                },
                LogCheck {
                    policy,
                    now,
                    cost,
                    record,
                },
            ),
            Kind::FixedWindow => shard.check(
                |t: &mut Tables| &mut t.windows,
                at,
                |merged, _| Some(fixed_window::inherit(merged.count, quota, now)),
                on_option(|w| record.run(w, |w| fixed_window::check(w, quota, now, cost))),
            ),
            Kind::SlidingWindow => shard.check(
                |t: &mut Tables| &mut t.counters,
                at,
                |merged, expires_at| merged.inherit(expires_at, quota, now),
                on_option(|c| record.run(c, |c| sliding_window::check(c, quota, now, cost))),
            ),
            Kind::TokenBucket(params) => shard.check(
                |t: &mut Tables| &mut t.buckets,
                at,
                |_, empty_at| bucket::empty_by(empty_at, params, now),
                on_option(|l| {
                    record.run(l, |l| {
                        bucket::check(l, params, quota, now, cost, Pacing::Off)
                    })
                }),
            ),
            Kind::LeakyBucket(params) => shard.check(
                |t: &mut Tables| &mut t.buckets,
                at,
                |_, empty_at| bucket::empty_by(empty_at, params, now),
                on_option(|l| {
                    record.run(l, |l| {
                        bucket::check(l, params, quota, now, cost, Pacing::On)
                    })
                }),
            ),
            Kind::Gcra(params) => shard.check(
                |t: &mut Tables| &mut t.gcra,
                at,
                // GCRA's state is a bucket's water: merged the same way.
                |_, empty_at| bucket::empty_by(empty_at, params, now),
                on_option(|t| record.run(t, |t| gcra::check(t, params, quota, now, cost))),
            ),
        })
    }

    /// Takes a permit of `limit` on `key` now, synchronously, when fewer
    /// than [`limit.max()`](ConcurrencyLimit::max) of the key's permits are
    /// held; the permit is given back when it is dropped.
    ///
    /// Permits are kept apart from the rate limits' state and are never
    /// evicted (the capacity does not count them); a key holds memory only
    /// while one of its permits is held. They need no lease: their holders
    /// are in this process.
    pub fn acquire_permit_now(&self, key: &str, limit: &ConcurrencyLimit) -> Acquired {
        self.inner.permits.acquire(key, limit)
    }

    /// How many permits of `key` are held now.
    pub fn permits_held(&self, key: &str) -> usize {
        self.inner.permits.held(key)
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

#[cfg(test)]
impl<C: Clock> MemoryStore<C> {
    /// [`check_now`](Self::check_now) of a key given as text.
    pub(crate) fn check_text(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        self.check_now(&Key::from(key), policy, cost)
    }

    /// Whether `key` holds live state (not counting ghosts).
    fn holds(&self, key: &str) -> bool {
        let hash = self.inner.hasher.hash_one(key);
        let now = self.inner.clock.now_micros();
        self.shard(hash).inspect(hash, key, now).0
    }

    /// How many ghost slots hold state that has not expired.
    fn live_ghosts(&self) -> usize {
        let now = self.inner.clock.now_micros();
        let shards = self.inner.shards.iter();
        shards.map(|s| lock(s).inspect(0, "", now).1).sum()
    }

    /// The ghost slot of `key` in a single-shard store of `capacity` keys.
    fn ghost_slot(&self, key: &str, capacity: usize) -> usize {
        ghost::index(self.inner.hasher.hash_one(key), capacity)
    }
}

/// A shard's lock: `parking_lot`'s, whose uncontended lock and unlock are
/// one atomic instruction each, with no poisoning to check (a panic while
/// holding a shard cannot leave it half-written: every update is a plain
/// assignment after the decision).
#[inline]
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard.lock()
}

impl<C: Clock> Store for MemoryStore<C> {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.check_now(key, policy, cost)
    }

    fn try_check_now(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        Some(self.check_now(key, policy, cost))
    }
}

/// A check of the sliding log, which runs in place on a live key's log:
/// taking it out of its entry and putting it back cost about a tenth of
/// the check.
struct LogCheck<'a> {
    policy: &'a Policy,
    now: u64,
    cost: u64,
    record: Record,
}

impl LogCheck<'_> {
    #[inline(always)]
    fn on(&self, entries: &mut Log) -> Decision {
        let policy = self.policy;
        let (rules, longest) = (policy.rules(), policy.longest_window_us());
        sliding_log::check_within(entries, rules, longest, self.now, self.cost)
    }
}

impl Run<Log> for LogCheck<'_> {
    #[inline(always)]
    fn live(self, log: &mut Log) -> Decision {
        match self.record {
            Record::Yes => {
                let decision = self.on(log);
                if log.is_empty() {
                    // Its buffer goes, as a new key's empty log would.
                    *log = Log::new();
                }
                decision
            }
            Record::No => self.on(&mut log.clone()),
        }
    }

    #[inline(always)]
    fn fresh(self, log: &mut Option<Log>) -> Decision {
        self.record.run(log, |log| {
            let entries = log.get_or_insert_with(Log::new);
            let decision = self.on(entries);
            if entries.is_empty() {
                *log = None;
            }
            decision
        })
    }
}

/// Whether a decision is kept (a check) or only read (a peek).
#[derive(Clone, Copy)]
enum Record {
    Yes,
    No,
}

impl Record {
    /// Runs `algorithm` on `state`, or on a copy of it that is dropped.
    #[inline(always)]
    fn run<S: Clone>(
        self,
        state: &mut Option<S>,
        algorithm: impl FnOnce(&mut Option<S>) -> Decision,
    ) -> Decision {
        match self {
            Self::Yes => algorithm(state),
            Self::No => algorithm(&mut state.clone()),
        }
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
