//! The identities a limit denied most in the last few minutes, in bounded
//! memory: a heavy-hitters sketch ([`TopDenied`]).
//!
//! Written here rather than taken from a crate: `topk` (MIT) offers
//! `FilteredSpaceSaving`, the filtered variant, which states that counts
//! overestimate within their error but neither the `N / k` bound nor that
//! every identity denied more than `N / k` times is listed (its hashed
//! filter counts some denials outside the counters); it takes each item by
//! value (a `String` allocated per denial, even for an identity it counts
//! already); and it would bring two dependencies (`ahash`,
//! `priority-queue`) where a hash table and a heap of `k` indexes do. Here
//! a counted identity is found by a borrowed `&str`, and a taken-over
//! counter reuses its text's buffer: a denial allocates nothing once the
//! sketch is full.

use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use std::{fmt, mem};

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::clock::{Clock, SystemClock};

mod shared;

pub use shared::DeniedReport;

/// One identity among the most denied: its denials counted, and how many
/// of them may be another identity's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The identity, as it was recorded (for the layers: the identity's
    /// part of the key, such as `user=alice` or `203.0.113.7`).
    pub identity: String,
    /// Its denials counted: at least its true count.
    pub count: u64,
    /// How much `count` may overestimate: the true count is in
    /// `[count - error, count]`.
    pub error: u64,
}

/// The identities denied most in the last one to two periods, with their
/// counts: two Space-Saving sketches of `k` counters each, the current
/// period's and the previous one's, read together.
///
/// Space-Saving (Metwally, Agrawal and El Abbadi, "Efficient computation
/// of frequent and top-k elements in data streams", 2005) keeps `k`
/// counters. A denial of an identity that has one adds 1 to it; one of an
/// identity without one, while fewer than `k` are used, starts a counter
/// at 1; otherwise the identity takes over the counter with the smallest
/// count, inherits that count (plus 1), and records the inherited count as
/// its `error`. With `N` denials counted:
///
/// - every count overestimates its identity's true count by at most its
///   `error`, which is at most `N / k`: the true count lies in
///   `[count - error, count]`;
/// - every identity denied more than `N / k` times has a counter.
///
/// Periods are counted on the injected [`Clock`] from the Unix epoch: a
/// denial recorded at time `t` is read until the end of the period after
/// `t`'s, so for at least one period and less than two. [`top`](Self::top)
/// adds each identity's counts and errors from both sketches; an identity
/// one of them does not hold gets that sketch's smallest count (when it
/// is full) in both, which keeps both guarantees with `N` the denials
/// counted in the two periods: errors at most `N / k`, and every identity
/// denied more than `N / k` times listed.
///
/// Memory is bounded: an identity longer than [`MAX_IDENTITY`](Self::MAX_IDENTITY)
/// bytes is not recorded (it is counted in [`skipped`](Self::skipped)
/// instead: cutting it would merge identities), so the two sketches hold
/// at most [`max_memory`](Self::max_memory) bytes,
/// [`MAX_BYTES`](Self::MAX_BYTES) for the default `k`. Nothing is
/// allocated before the first denial.
///
/// Thread-safe: a denial takes a short lock (a hash lookup and a heap step,
/// O(log k)).
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use limiter_core::{ManualClock, TopDenied};
///
/// let clock = ManualClock::new(Duration::from_secs(1_000));
/// let period = Duration::from_secs(300);
/// let top = TopDenied::with_clock(NonZeroUsize::new(64).unwrap(), period, clock.clone());
/// for _ in 0..3 {
///     top.record("user=mallory");
/// }
/// top.record("user=alice");
/// let denied = top.top(10);
/// assert_eq!(denied[0].identity, "user=mallory");
/// assert_eq!((denied[0].count, denied[0].error), (3, 0));
/// // Two periods later, forgotten.
/// clock.advance(period * 2);
/// assert!(top.top(10).is_empty());
/// ```
pub struct TopDenied<C = SystemClock> {
    counters: usize,
    period_micros: u64,
    clock: C,
    skipped: AtomicU64,
    windows: Mutex<Windows>,
}

/// The two periods' sketches.
struct Windows {
    /// The period `current` counts (time / period).
    index: u64,
    current: Sketch,
    previous: Sketch,
}

impl TopDenied {
    /// The counters of each sketch unless told otherwise.
    pub const DEFAULT_COUNTERS: usize = 256;

    /// The period unless told otherwise: denials are read for 5 to 10
    /// minutes.
    pub const DEFAULT_PERIOD: Duration = Duration::from_secs(300);

    /// The most memory the two sketches of [`DEFAULT_COUNTERS`](Self::DEFAULT_COUNTERS)
    /// hold: [`max_memory`](Self::max_memory) for that `k`.
    pub const MAX_BYTES: usize = max_bytes(Self::DEFAULT_COUNTERS);

    /// [`DEFAULT_COUNTERS`](Self::DEFAULT_COUNTERS) counters and the
    /// [`DEFAULT_PERIOD`](Self::DEFAULT_PERIOD), on the system clock.
    pub fn new() -> Self {
        Self::with_clock(
            NonZeroUsize::new(Self::DEFAULT_COUNTERS).expect("non-zero"),
            Self::DEFAULT_PERIOD,
            SystemClock,
        )
    }
}

impl Default for TopDenied {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> TopDenied<C> {
    /// The longest identity recorded, in bytes; a longer one is counted in
    /// [`skipped`](Self::skipped). (An identity is recorded whole and
    /// percent-encoded, never hashed: an API key of printable ASCII up to
    /// about 500 bytes is listed, one of other bytes up to a third of it.)
    pub const MAX_IDENTITY: usize = 512;
}

impl<C: Clock> TopDenied<C> {
    /// `counters` counters in each sketch, rotated every `period` of
    /// `clock`.
    ///
    /// # Panics
    /// When `period` is shorter than a microsecond.
    pub fn with_clock(counters: NonZeroUsize, period: Duration, clock: C) -> Self {
        let period_micros = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
        assert!(period_micros > 0, "a period of at least 1 µs");
        let index = clock.now_micros() / period_micros;
        Self {
            counters: counters.get(),
            period_micros,
            clock,
            skipped: AtomicU64::new(0),
            windows: Mutex::new(Windows {
                index,
                current: Sketch::new(),
                previous: Sketch::new(),
            }),
        }
    }

    /// Counts one denial of `identity`; one longer than
    /// [`MAX_IDENTITY`](Self::MAX_IDENTITY) bytes is counted in
    /// [`skipped`](Self::skipped) only.
    pub fn record(&self, identity: &str) {
        if identity.len() > Self::MAX_IDENTITY {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let now = self.clock.now_micros() / self.period_micros;
        let mut windows = self.windows.lock();
        windows.rotate(now);
        windows.current.record(identity, self.counters);
    }

    /// Counts one denial of `identity`, under its
    /// [`labelled`](crate::Identity::labelled) text: shown whole, as the
    /// admin routes take it. One whose text would be longer than
    /// [`MAX_IDENTITY`](Self::MAX_IDENTITY) bytes is counted in
    /// [`skipped`](Self::skipped) only, its text never built.
    pub fn record_identity(&self, identity: &crate::Identity) {
        if identity.value().len() > Self::MAX_IDENTITY {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.record(&identity.labelled());
    }

    /// The `n` identities with the highest counts over the current and the
    /// previous period, highest first (equal counts: smaller error first,
    /// then by identity).
    pub fn top(&self, n: usize) -> Vec<Denied> {
        let now = self.clock.now_micros() / self.period_micros;
        let mut denied = {
            let mut windows = self.windows.lock();
            windows.rotate(now);
            windows.merged(self.counters)
        };
        sort(&mut denied);
        denied.truncate(n);
        denied
    }

    /// The denials counted over the current and the previous period (the
    /// `N` of the bound `N / k`), skipped ones left out.
    pub fn counted(&self) -> u64 {
        let now = self.clock.now_micros() / self.period_micros;
        let mut windows = self.windows.lock();
        windows.rotate(now);
        windows.current.total + windows.previous.total
    }

    /// The denials of identities too long to record, since this was made.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// The counters of each sketch (`k`).
    pub fn counters(&self) -> usize {
        self.counters
    }

    /// The bytes the two sketches hold now (their tables, heaps and
    /// identities' buffers): at most [`max_memory`](Self::max_memory).
    pub fn memory(&self) -> usize {
        let windows = self.windows.lock();
        windows.current.memory() + windows.previous.memory()
    }

    /// The most bytes the two sketches can hold, whatever is recorded.
    pub fn max_memory(&self) -> usize {
        max_bytes(self.counters)
    }
}

/// Highest count first; equal counts, smaller error first, then by
/// identity.
fn sort(denied: &mut [Denied]) {
    denied.sort_unstable_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.error.cmp(&b.error))
            .then_with(|| a.identity.cmp(&b.identity))
    });
}

/// The most bytes two sketches of `k` counters hold: per counter its entry,
/// its heap index and an identity of [`TopDenied::MAX_IDENTITY`] bytes; the
/// hash table at most 8 slots (4 bytes and a control byte each) per
/// counter, and its group padding.
const fn max_bytes(k: usize) -> usize {
    let per_counter = mem::size_of::<Entry>() + mem::size_of::<u32>() + 512;
    let table = 8 * k * (mem::size_of::<u32>() + 1) + 64;
    2 * (k * per_counter + table)
}

impl<C> fmt::Debug for TopDenied<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopDenied")
            .field("counters", &self.counters)
            .field("period", &Duration::from_micros(self.period_micros))
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl Windows {
    /// Moves to the period `now`: the current sketch becomes the previous
    /// one after one period; both are emptied after two or more. A clock
    /// that steps back keeps the sketches as they are.
    fn rotate(&mut self, now: u64) {
        if now <= self.index {
            return;
        }
        if now == self.index + 1 {
            mem::swap(&mut self.current, &mut self.previous);
            self.current.clear();
        } else {
            self.current.clear();
            self.previous.clear();
        }
        self.index = now;
    }

    /// Every identity either sketch holds, with both sketches' counts and
    /// errors added (a sketch that does not hold it adds its floor).
    fn merged(&self, k: usize) -> Vec<Denied> {
        let (current, previous) = (&self.current, &self.previous);
        let mut denied = Vec::with_capacity(current.entries.len() + previous.entries.len());
        let floor_previous = previous.floor(k);
        for entry in &current.entries {
            let (count, error) = previous
                .get(&entry.identity)
                .map_or((floor_previous, floor_previous), |e| (e.count, e.error));
            denied.push(Denied {
                identity: entry.identity.clone(),
                count: entry.count + count,
                error: entry.error + error,
            });
        }
        let floor_current = current.floor(k);
        for entry in &previous.entries {
            if current.get(&entry.identity).is_none() {
                denied.push(Denied {
                    identity: entry.identity.clone(),
                    count: entry.count + floor_current,
                    error: entry.error + floor_current,
                });
            }
        }
        denied
    }
}

/// One Space-Saving sketch: `k` entries (allocated whole at the first
/// denial), found by identity through a hash table of their indexes, and
/// a min-heap of their indexes by count.
struct Sketch {
    entries: Vec<Entry>,
    /// Entry indexes, the smallest count first.
    heap: Vec<u32>,
    /// Entry indexes, by their identity's hash.
    index: HashTable<u32>,
    hasher: RandomState,
    /// Denials counted.
    total: u64,
}

struct Entry {
    identity: String,
    count: u64,
    error: u64,
    hash: u64,
    /// Its place in the heap.
    at: u32,
}

impl Sketch {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            heap: Vec::new(),
            index: HashTable::new(),
            hasher: RandomState::default(),
            total: 0,
        }
    }

    fn clear(&mut self) {
        // The allocations stay: the next period fills them again.
        self.entries.clear();
        self.heap.clear();
        self.index.clear();
        self.total = 0;
    }

    fn get(&self, identity: &str) -> Option<&Entry> {
        let hash = self.hasher.hash_one(identity);
        let at = self
            .index
            .find(hash, |&i| self.entries[i as usize].identity == identity)?;
        Some(&self.entries[*at as usize])
    }

    /// The count of an identity this sketch does not hold may reach: its
    /// smallest count once its `k` counters are used, else 0 (it holds
    /// every identity it counted).
    fn floor(&self, k: usize) -> u64 {
        if self.entries.len() < k {
            return 0;
        }
        self.heap
            .first()
            .map_or(0, |&i| self.entries[i as usize].count)
    }

    fn record(&mut self, identity: &str, k: usize) {
        self.total += 1;
        let hash = self.hasher.hash_one(identity);
        let entries = &self.entries;
        if let Some(&i) = self
            .index
            .find(hash, |&i| entries[i as usize].identity == identity)
        {
            let entry = &mut self.entries[i as usize];
            entry.count += 1;
            let at = entry.at as usize;
            self.sift_down(at);
            return;
        }
        if self.entries.len() < k {
            if self.entries.is_empty() {
                // Whole, once: no growth past `k`.
                self.entries.reserve_exact(k);
                self.heap.reserve_exact(k);
                let entries = &self.entries;
                self.index.reserve(k, |&i| entries[i as usize].hash);
            }
            let i = self.entries.len() as u32;
            let at = self.heap.len();
            self.entries.push(Entry {
                identity: identity.to_owned(),
                count: 1,
                error: 0,
                hash,
                at: at as u32,
            });
            self.heap.push(i);
            let entries = &self.entries;
            self.index
                .insert_unique(hash, i, |&i| entries[i as usize].hash);
            self.sift_up(at);
            return;
        }
        // The smallest counter changes hands.
        let i = self.heap[0];
        let old_hash = self.entries[i as usize].hash;
        if let Ok(found) = self.index.find_entry(old_hash, |&j| j == i) {
            found.remove();
        }
        let entry = &mut self.entries[i as usize];
        entry.error = entry.count;
        entry.count += 1;
        entry.hash = hash;
        entry.identity.clear();
        // Exactly: a buffer never grows past the longest identity it held.
        entry.identity.reserve_exact(identity.len());
        entry.identity.push_str(identity);
        let entries = &self.entries;
        self.index
            .insert_unique(hash, i, |&i| entries[i as usize].hash);
        self.sift_down(0);
    }

    fn count_at(&self, at: usize) -> u64 {
        self.entries[self.heap[at] as usize].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.entries[self.heap[a] as usize].at = a as u32;
        self.entries[self.heap[b] as usize].at = b as u32;
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.count_at(parent) <= self.count_at(at) {
                break;
            }
            self.swap(parent, at);
            at = parent;
        }
    }

    fn sift_down(&mut self, mut at: usize) {
        let len = self.heap.len();
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut smallest = at;
            if left < len && self.count_at(left) < self.count_at(smallest) {
                smallest = left;
            }
            if right < len && self.count_at(right) < self.count_at(smallest) {
                smallest = right;
            }
            if smallest == at {
                break;
            }
            self.swap(at, smallest);
            at = smallest;
        }
    }

    /// The bytes this sketch holds: entries, heap, table, identities.
    fn memory(&self) -> usize {
        let identities: usize = self.entries.iter().map(|e| e.identity.capacity()).sum();
        self.entries.capacity() * mem::size_of::<Entry>()
            + self.heap.capacity() * mem::size_of::<u32>()
            + self.index.allocation_size()
            + identities
    }
}

// The heap's invariants, for the tests.
#[cfg(test)]
impl Sketch {
    fn heap_holds(&self) -> bool {
        (1..self.heap.len()).all(|at| self.count_at((at - 1) / 2) <= self.count_at(at))
            && self
                .heap
                .iter()
                .enumerate()
                .all(|(at, &i)| self.entries[i as usize].at as usize == at)
    }
}

#[cfg(test)]
mod tests;
