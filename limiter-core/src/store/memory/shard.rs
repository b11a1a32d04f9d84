//! One shard of the memory store: a table per kind of state, swept and
//! bounded together.
//!
//! Each kind of state has its own table so that an entry is no larger than
//! its state needs (a GCRA or bucket entry is 48 bytes; one enum of every
//! state would make each 80): fewer cache lines per check, and more keys per
//! megabyte.

use std::hash::BuildHasher;
use std::mem;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use crate::algorithm::Micros;
use crate::algorithm::bucket::Level;
use crate::algorithm::fixed_window::Window;
use crate::algorithm::sliding_log::Log;
use crate::algorithm::sliding_window::Counters;
use crate::decision::Decision;

/// The gauge of keys holding state, over every memory store of the process
/// (including the fallback limiters of guarded stores).
const LIVE_KEYS: &str = "limiter_memory_store_keys";
/// A shard is not swept before it holds this many keys.
pub(super) const MIN_SWEEP_LEN: usize = 64;

pub(super) struct Shard {
    tables: Tables,
    sweep_at_len: usize,
    /// The most keys this shard holds.
    pub(super) capacity: usize,
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

pub(super) struct Table<S> {
    entries: HashTable<Entry<S>>,
}

struct Entry<S> {
    key: Box<str>,
    /// After this instant the state means the same as no state at all.
    expires_at: Micros,
    /// The shard's tick at this key's last check.
    last_used: u32,
    state: S,
}

// The sizes BENCHMARKS.md reports.
const _: () = assert!(std::mem::size_of::<Entry<Level>>() == 48);

/// The key being checked, and when.
#[derive(Clone, Copy)]
pub(super) struct Lookup<'a> {
    pub(super) key: &'a str,
    pub(super) hash: u64,
    pub(super) now: Micros,
    /// Rehashes keys when a table grows (entries do not keep their hash).
    pub(super) hasher: &'a RandomState,
}

impl Shard {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            tables: Tables::default(),
            sweep_at_len: MIN_SWEEP_LEN,
            capacity,
            tick: 0,
        }
    }

    /// Runs `algorithm` on the key's state in `table` and keeps what it
    /// records. A key new to the table starts with no state (and loses any
    /// state it held in another table: a key reused with another algorithm
    /// starts afresh).
    #[inline]
    pub(super) fn check<S: Default>(
        &mut self,
        table: fn(&mut Tables) -> &mut Table<S>,
        at: Lookup<'_>,
        algorithm: impl FnOnce(&mut Option<S>) -> Decision,
    ) -> Decision {
        self.tick = self.tick.wrapping_add(1);
        let tick = self.tick;
        if let Some(entry) = table(&mut self.tables).find(at) {
            let mut state = Some(mem::take(&mut entry.state));
            let decision = algorithm(&mut state);
            entry.state = state.unwrap_or_default();
            entry.expires_at = at.now + decision.reset_after_us();
            entry.last_used = tick;
            return decision;
        }
        let mut state = None;
        let decision = algorithm(&mut state);
        if let Some(state) = state {
            self.insert(table, at, decision.reset_after_us(), state);
        }
        decision
    }

    #[cold]
    fn insert<S>(
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
        metrics::gauge!(LIVE_KEYS).decrement(removed as f64);
        if self.len() >= self.sweep_at_len.min(self.capacity) {
            self.sweep(at.now);
        }
        if self.len() >= self.capacity {
            self.evict_least_recently_used();
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
        metrics::gauge!(LIVE_KEYS).increment(1.0);
    }

    pub(super) fn len(&mut self) -> usize {
        self.tables.all().iter().map(|t| t.len()).sum()
    }

    /// Drops the least recently used eighth (at least one key); a batch, so
    /// the cost is amortized over the inserts that refill it.
    fn evict_least_recently_used(&mut self) {
        let tick = self.tick;
        let mut tables = self.tables.all();
        let mut ages = Vec::with_capacity(tables.iter().map(|t| t.len()).sum());
        for table in &tables {
            table.ages(tick, &mut ages);
        }
        let batch = (ages.len() / 8).max(1);
        let (_, &mut threshold, _) = ages.select_nth_unstable_by(batch - 1, |a, b| b.cmp(a));
        let mut evicted = 0;
        for table in &mut tables {
            table.evict_older(tick, threshold, batch, &mut evicted);
        }
        metrics::gauge!(LIVE_KEYS).decrement(evicted as f64);
    }

    pub(super) fn sweep(&mut self, now: Micros) {
        let swept: usize = self.tables.all().iter_mut().map(|t| t.sweep(now)).sum();
        self.sweep_at_len = (self.len() * 2).max(MIN_SWEEP_LEN);
        metrics::gauge!(LIVE_KEYS).decrement(swept as f64);
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

impl<S> Default for Table<S> {
    fn default() -> Self {
        Self {
            entries: HashTable::new(),
        }
    }
}

impl<S> Table<S> {
    #[inline]
    fn find(&mut self, at: Lookup<'_>) -> Option<&mut Entry<S>> {
        self.entries.find_mut(at.hash, |e| &*e.key == at.key)
    }
}

/// What a shard does with every table, whatever its state.
trait AnyTable {
    fn len(&self) -> usize;
    /// Removes the key; whether it was there.
    fn remove(&mut self, hash: u64, key: &str) -> bool;
    /// Removes the state whose windows have passed; how many keys went.
    fn sweep(&mut self, now: Micros) -> usize;
    /// Pushes every key's age in ticks.
    fn ages(&self, tick: u32, ages: &mut Vec<u32>);
    /// Removes keys older than `threshold` ticks, and those exactly that old
    /// while fewer than `batch` keys have gone; counts them in `evicted`.
    fn evict_older(&mut self, tick: u32, threshold: u32, batch: usize, evicted: &mut usize);
}

impl<S> AnyTable for Table<S> {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn remove(&mut self, hash: u64, key: &str) -> bool {
        match self.entries.find_entry(hash, |e| &*e.key == key) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    fn sweep(&mut self, now: Micros) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| e.expires_at > now);
        before - self.entries.len()
    }

    fn ages(&self, tick: u32, ages: &mut Vec<u32>) {
        ages.extend(self.entries.iter().map(|e| tick.wrapping_sub(e.last_used)));
    }

    fn evict_older(&mut self, tick: u32, threshold: u32, batch: usize, evicted: &mut usize) {
        self.entries.retain(|e| {
            let age = tick.wrapping_sub(e.last_used);
            let evict = age > threshold || (age == threshold && *evicted < batch);
            *evicted += usize::from(evict);
            !evict
        });
    }
}
