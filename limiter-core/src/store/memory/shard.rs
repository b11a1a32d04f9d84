//! One shard of the memory store: a table per kind of state, swept and
//! bounded together.
//!
//! Each kind of state has its own table so that an entry is no larger than
//! its state needs (a GCRA or bucket entry is 56 bytes; one enum of every
//! state would make each 80): fewer cache lines per check, and more keys per
//! megabyte.
//! Each table keeps the [ghosts](super::ghost) of the state it evicts.

use std::hash::BuildHasher;
use std::mem;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use crate::Decision;
use crate::algorithm::Micros;
use crate::algorithm::bucket::Level;
use crate::algorithm::fixed_window::Window;
use crate::algorithm::sliding_log::Log;
use crate::algorithm::sliding_window::Counters;

use super::ghost::{Evictable, GhostBounds, Ghosts, Haunt, REMEMBERED_PER_KEY};

/// The gauge of keys holding state, over every memory store of the process
/// (including the fallback limiters of guarded stores).
const LIVE_KEYS: &str = "limiter_memory_store_keys";
/// A shard is not swept before it holds this many keys.
pub(super) const MIN_SWEEP_LEN: usize = 64;

/// How many keys a store holds, over all its shards, and the most it holds:
/// a shard evicts only when the store as a whole is full, so no key is
/// evicted while fewer keys than the capacity hold state, however unevenly
/// the keys fall into shards.
#[derive(Debug)]
pub(super) struct Keys {
    live: AtomicUsize,
    pub(super) capacity: AtomicUsize,
}

impl Keys {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            live: AtomicUsize::new(0),
            capacity: AtomicUsize::new(capacity),
        }
    }

    fn is_full(&self) -> bool {
        self.live.load(Ordering::Relaxed) >= self.capacity.load(Ordering::Relaxed)
    }

    fn added(&self, keys: usize) {
        self.live.fetch_add(keys, Ordering::Relaxed);
        metrics::gauge!(LIVE_KEYS).increment(keys as f64);
    }

    fn removed(&self, keys: usize) {
        self.live.fetch_sub(keys, Ordering::Relaxed);
        metrics::gauge!(LIVE_KEYS).decrement(keys as f64);
    }
}

pub(super) struct Shard {
    tables: Tables,
    sweep_at_len: usize,
    /// The store's count and capacity of keys, shared by its shards.
    keys: Arc<Keys>,
    /// This shard's part of the capacity: the size of its ghosts' coarse
    /// slots, and of what they remember exactly by default.
    pub(super) capacity: usize,
    /// How many evicted keys each table remembers exactly; by default
    /// [`REMEMBERED_PER_KEY`] times the capacity.
    pub(super) remembered: Option<usize>,
    /// Counts this shard's checks: the clock of least-recently-used eviction.
    tick: u32,
}

/// A table per kind of state. The token and leaky buckets share one: their
/// state is the same water level.
#[derive(Default)]
pub(super) struct Tables {
    pub(super) logs: Table<Log>,
    pub(super) windows: Table<Window>,
    pub(super) counters: Table<Counters>,
    pub(super) buckets: Table<Level>,
    pub(super) gcra: Table<Level>,
}

pub(super) struct Table<S: Evictable> {
    entries: HashTable<Entry<S>>,
    ghosts: Ghosts<S>,
}

struct Entry<S> {
    key: Box<str>,
    /// After this instant the state means the same as no state at all.
    expires_at: Micros,
    /// The shard's tick at this key's last check.
    last_used: u32,
    state: S,
}

// An entry's size, which each key held costs (the lab notes' memory flood).
const _: () = assert!(std::mem::size_of::<Entry<Level>>() == 56);

/// The key being checked, and when.
#[derive(Clone, Copy)]
pub(super) struct Lookup<'a> {
    pub(super) key: &'a str,
    pub(super) hash: u64,
    pub(super) now: Micros,
    /// Rehashes keys when a table grows (entries do not keep their hash).
    pub(super) hasher: &'a RandomState,
}

/// What a check runs on a key's state.
pub(super) trait Run<S> {
    /// Runs on a live entry's state.
    fn live(self, state: &mut S) -> Decision;
    /// Runs on a key new to the table: the state its ghost gave back, or
    /// none; what is left in `state` is kept.
    fn fresh(self, state: &mut Option<S>) -> Decision;
}

/// An algorithm of the model, which takes its state as an `Option`
/// wherever it is: a live entry's is taken out and put back.
pub(super) struct OnOption<F>(F);

/// `algorithm` as a [`Run`] (a function, so that the closure's argument
/// takes any lifetime).
#[inline(always)]
pub(super) fn on_option<S, F: FnOnce(&mut Option<S>) -> Decision>(algorithm: F) -> OnOption<F> {
    OnOption(algorithm)
}

impl<S: Default, F: FnOnce(&mut Option<S>) -> Decision> Run<S> for OnOption<F> {
    #[inline(always)]
    fn live(self, state: &mut S) -> Decision {
        let mut taken = Some(mem::take(state));
        let decision = (self.0)(&mut taken);
        *state = taken.unwrap_or_default();
        decision
    }

    #[inline(always)]
    fn fresh(self, state: &mut Option<S>) -> Decision {
        (self.0)(state)
    }
}

impl Shard {
    pub(super) fn new(capacity: usize, keys: Arc<Keys>) -> Self {
        Self {
            tables: Tables::default(),
            sweep_at_len: MIN_SWEEP_LEN,
            keys,
            capacity,
            remembered: None,
            tick: 0,
        }
    }

    /// Runs `algorithm` on the key's state in `table` and keeps what it
    /// records. A key new to the table starts with the state its ghost slot
    /// gives back: its own, exactly, or what `inherit` makes of a merge
    /// (with the merge's expiry) under the key's policy, or none. It loses
    /// any state it held in another table: a key reused with another
    /// algorithm starts afresh.
    #[inline(always)]
    pub(super) fn check<S: Default + Evictable>(
        &mut self,
        table: fn(&mut Tables) -> &mut Table<S>,
        at: Lookup<'_>,
        inherit: impl FnOnce(&S::Summary, Micros) -> Option<S>,
        algorithm: impl Run<S>,
    ) -> Decision {
        self.tick = self.tick.wrapping_add(1);
        let tick = self.tick;
        let tables = &mut self.tables;
        if let Some(entry) = table(tables).find(at) {
            let decision = algorithm.live(&mut entry.state);
            entry.expires_at = at.now + decision.reset_after_us();
            entry.last_used = tick;
            return decision;
        }
        let mut state = match table(tables).ghosts.visit(at.hash, at.now) {
            Haunt::Nothing => None,
            Haunt::Exact(state) => Some(state),
            Haunt::Merged {
                summary,
                expires_at,
            } => inherit(summary, expires_at),
        };
        let decision = algorithm.fresh(&mut state);
        if let Some(state) = state {
            self.insert(table, at, decision.reset_after_us(), state);
        }
        decision
    }

    /// Changes the key's live state in `table` by `change` (a refund). A
    /// key that is not live (never checked, expired, or evicted) is left
    /// as it is: what it recorded stays counted where it went.
    pub(super) fn change<S: Default + Evictable>(
        &mut self,
        table: fn(&mut Tables) -> &mut Table<S>,
        at: Lookup<'_>,
        change: impl FnOnce(&mut Option<S>),
    ) {
        if let Some(entry) = table(&mut self.tables).find(at) {
            let mut state = Some(mem::take(&mut entry.state));
            change(&mut state);
            entry.state = state.unwrap_or_default();
        }
    }

    /// Forgets the key: its state in every table and its exact ghost. A
    /// merge of evicted keys that may still hold its state is shadowed by
    /// an empty state of `table` until the merge expires, so the key starts
    /// afresh.
    pub(super) fn reset<S: Default + Evictable>(
        &mut self,
        table: fn(&mut Tables) -> &mut Table<S>,
        at: Lookup<'_>,
    ) {
        let removed: usize = self
            .tables
            .all()
            .iter_mut()
            .map(|t| usize::from(t.remove(at.hash, at.key)))
            .sum();
        self.keys.removed(removed);
        let merged_until = match table(&mut self.tables).ghosts.visit(at.hash, at.now) {
            Haunt::Merged { expires_at, .. } => Some(expires_at),
            Haunt::Nothing | Haunt::Exact(_) => None,
        };
        if let Some(until) = merged_until.filter(|&until| until > at.now) {
            self.insert(table, at, until - at.now, S::default());
        }
    }

    #[cold]
    fn insert<S: Evictable>(
        &mut self,
        table: fn(&mut Tables) -> &mut Table<S>,
        at: Lookup<'_>,
        lasts_us: Micros,
        state: S,
    ) {
        let removed: usize = self
            .tables
            .all()
            .iter_mut()
            .map(|t| usize::from(t.remove(at.hash, at.key)))
            .sum();
        self.keys.removed(removed);
        if self.len() >= self.sweep_at_len {
            self.sweep(at.now);
        }
        // Only a full store evicts, from the shard of the key coming in
        // (keys whose windows have passed first). Checks in other shards
        // at the same instant may each add a key: the store holds at most
        // the capacity and one key per shard.
        if self.keys.is_full() && self.len() > 0 {
            self.sweep(at.now);
            if self.keys.is_full() && self.len() > 0 {
                self.evict_least_recently_used(at);
            }
        }
        let entry = Entry {
            key: at.key.into(),
            expires_at: at.now + lasts_us,
            last_used: self.tick,
            state,
        };
        table(&mut self.tables)
            .entries
            .insert_unique(at.hash, entry, |e| at.hasher.hash_one(&*e.key));
        self.keys.added(1);
    }

    pub(super) fn len(&mut self) -> usize {
        self.tables.all().iter().map(|t| t.len()).sum()
    }

    /// Evicts the least recently used eighth (at least one key) into the
    /// ghosts; a batch, so the cost is amortized over the inserts that
    /// refill it.
    fn evict_least_recently_used(&mut self, at: Lookup<'_>) {
        let tick = self.tick;
        let burial = Burial {
            now: at.now,
            hasher: at.hasher,
            bounds: self.ghost_bounds(),
        };
        let mut tables = self.tables.all();
        let mut ages = Vec::with_capacity(tables.iter().map(|t| t.len()).sum());
        for table in &tables {
            table.ages(tick, &mut ages);
        }
        let batch = (ages.len() / 8).max(1);
        let (_, &mut threshold, _) = ages.select_nth_unstable_by(batch - 1, |a, b| b.cmp(a));
        let mut evicted = 0;
        for table in &mut tables {
            table.evict_older(tick, threshold, batch, &mut evicted, &burial);
        }
        self.keys.removed(evicted);
    }

    fn ghost_bounds(&self) -> GhostBounds {
        GhostBounds {
            remembered: self
                .remembered
                .unwrap_or(self.capacity.saturating_mul(REMEMBERED_PER_KEY)),
            slots: self.capacity,
        }
    }

    /// How many evicted keys are remembered exactly, and the bytes that takes.
    pub(super) fn remembered(&mut self) -> (usize, usize) {
        let tables = self.tables.all();
        tables.iter().fold((0, 0), |(keys, bytes), t| {
            let (k, b) = t.remembered();
            (keys + k, bytes + b)
        })
    }

    /// Whether the key holds live state, and how many ghost slots are live.
    #[cfg(test)]
    pub(super) fn inspect(&mut self, hash: u64, key: &str, now: Micros) -> (bool, usize) {
        let tables = self.tables.all();
        let holds = tables.iter().any(|t| t.holds(hash, key));
        (holds, tables.iter().map(|t| t.live_ghosts(now)).sum())
    }

    pub(super) fn sweep(&mut self, now: Micros) {
        let swept: usize = self.tables.all().iter_mut().map(|t| t.sweep(now)).sum();
        self.sweep_at_len = (self.len() * 2).max(MIN_SWEEP_LEN);
        self.keys.removed(swept);
    }
}

impl Tables {
    fn all(&mut self) -> [&mut dyn AnyTable; 5] {
        [
            &mut self.logs,
            &mut self.windows,
            &mut self.counters,
            &mut self.buckets,
            &mut self.gcra,
        ]
    }
}

impl<S: Evictable> Default for Table<S> {
    fn default() -> Self {
        Self {
            entries: HashTable::new(),
            ghosts: Ghosts::default(),
        }
    }
}

impl<S: Evictable> Table<S> {
    #[inline]
    fn find(&mut self, at: Lookup<'_>) -> Option<&mut Entry<S>> {
        self.entries.find_mut(at.hash, |e| &*e.key == at.key)
    }
}

/// Where evicted state goes: the time of the eviction, the hasher that
/// finds each evicted key's hash, and how many ghosts a table keeps.
struct Burial<'a> {
    now: Micros,
    hasher: &'a RandomState,
    bounds: GhostBounds,
}

/// What a shard does with every table, whatever its state.
trait AnyTable {
    fn len(&self) -> usize;
    /// Evicted keys remembered exactly, and the bytes their table holds.
    fn remembered(&self) -> (usize, usize);
    /// Removes the key, and its exact ghost; whether it was there.
    fn remove(&mut self, hash: u64, key: &str) -> bool;
    /// Removes the state whose windows have passed, and such ghosts; how
    /// many keys went.
    fn sweep(&mut self, now: Micros) -> usize;
    /// Pushes every key's age in ticks.
    fn ages(&self, tick: u32, ages: &mut Vec<u32>);
    #[cfg(test)]
    fn holds(&self, hash: u64, key: &str) -> bool;
    #[cfg(test)]
    fn live_ghosts(&self, now: Micros) -> usize;
    /// Evicts keys older than `threshold` ticks, and those exactly that old
    /// while fewer than `batch` keys have gone, into the ghosts; counts them
    /// in `evicted`.
    fn evict_older(
        &mut self,
        tick: u32,
        threshold: u32,
        batch: usize,
        evicted: &mut usize,
        burial: &Burial<'_>,
    );
}

impl<S: Evictable> AnyTable for Table<S> {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn remembered(&self) -> (usize, usize) {
        (self.ghosts.remembered_len(), self.ghosts.remembered_bytes())
    }

    fn remove(&mut self, hash: u64, key: &str) -> bool {
        self.ghosts.forget(hash);
        match self.entries.find_entry(hash, |e| &*e.key == key) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    fn sweep(&mut self, now: Micros) -> usize {
        self.ghosts.sweep(now);
        let before = self.entries.len();
        self.entries.retain(|e| e.expires_at > now);
        before - self.entries.len()
    }

    fn ages(&self, tick: u32, ages: &mut Vec<u32>) {
        ages.extend(self.entries.iter().map(|e| tick.wrapping_sub(e.last_used)));
    }

    #[cfg(test)]
    fn holds(&self, hash: u64, key: &str) -> bool {
        self.entries.find(hash, |e| &*e.key == key).is_some()
    }

    #[cfg(test)]
    fn live_ghosts(&self, now: Micros) -> usize {
        self.ghosts.live(now)
    }

    fn evict_older(
        &mut self,
        tick: u32,
        threshold: u32,
        batch: usize,
        evicted: &mut usize,
        burial: &Burial<'_>,
    ) {
        let gone = self.entries.extract_if(|e| {
            let age = tick.wrapping_sub(e.last_used);
            let evict = age > threshold || (age == threshold && *evicted < batch);
            *evicted += usize::from(evict);
            evict
        });
        for entry in gone {
            let hash = burial.hasher.hash_one(&*entry.key);
            self.ghosts.bury(
                hash,
                entry.expires_at,
                entry.state,
                burial.now,
                burial.bounds,
            );
        }
    }
}
