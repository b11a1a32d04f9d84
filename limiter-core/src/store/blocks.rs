//! Identities blocked for a while: [`SharedControl`](super::SharedControl) as the memory
//! store keeps it, and the local copy a shared store keeps of its blocks so
//! that each request is answered without a call ([`BlockList`]).
//!
//! Blocks set by an operator and blocks earned by penalties are bounded
//! apart: a flood of penalties (which any client can earn with made-up
//! identities) never removes an operator's block, and never stops a later
//! offender from being blocked, because past its bound the penalty block
//! that ends soonest gives way.

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use entries::{Entries, micros};

/// The most blocks an operator may set in one list: past it, a new one is
/// refused with an error (an operator lifts one first).
pub const MAX_BLOCKS: usize = 1_000_000;

/// How many penalty-earned blocks a list keeps unless configured: past it,
/// the one that ends soonest gives way to the new one.
pub const DEFAULT_MAX_PENALTY_BLOCKS: usize = 100_000;

/// The most blocks one [`BlockList::page`] answers.
pub const MAX_BLOCKS_PAGE: usize = 1_000;

/// Who set a block: each kind is bounded apart (see [`BlockList`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockOrigin {
    /// Set by an operator (an admin route, [`Limiter::block`](crate::Limiter::block)):
    /// at most [`MAX_BLOCKS`], refused past it, never evicted.
    Operator,
    /// Earned by a penalty: at most the list's penalty bound
    /// ([`DEFAULT_MAX_PENALTY_BLOCKS`] unless set), the soonest-ending one
    /// evicted past it.
    Penalty,
}

impl BlockOrigin {
    /// Its name in metrics and admin answers: `operator`, `penalty`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Penalty => "penalty",
        }
    }
}

/// One live block, as [`BlockList::page`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedBlock {
    /// The blocked key.
    pub key: String,
    /// How long it stays blocked.
    pub left: Duration,
    /// Who set the block that ends last, the one that decides how long the
    /// key stays blocked (the operator's on a tie).
    pub origin: BlockOrigin,
}

/// Blocked keys and when each block ends (µs, on the caller's clock):
/// what a store answers [`ControlTables::blocked`](crate::ControlTables::blocked) from.
/// A request asks it before its rate check, so an empty list costs one
/// atomic load, and the clock is read only when the list holds blocks.
///
/// A key may hold an operator's block and a penalty's at once: it is
/// blocked until the later one ends, and an unblock lifts both. Operator
/// blocks are refused past [`MAX_BLOCKS`]; penalty blocks past their bound
/// evict the penalty block that ends soonest, found in an index ordered by
/// end time (O(log n)). Ended blocks are swept as time passes.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{BlockList, BlockOrigin};
///
/// let list = BlockList::with_max_penalty_blocks(2);
/// let now = 1_000_000;
/// list.block("rl:admin-choice", Duration::from_secs(60), BlockOrigin::Operator, now)?;
/// for (i, secs) in [10, 20, 30].into_iter().enumerate() {
///     list.block(&format!("rl:user=u{i}"), Duration::from_secs(secs), BlockOrigin::Penalty, now)?;
/// }
/// // u0's block ended soonest: it gave way; the operator's block stays.
/// assert_eq!(list.blocked("rl:user=u0", || now), None);
/// assert_eq!(list.blocked("rl:user=u2", || now), Some(Duration::from_secs(30)));
/// assert_eq!(list.blocked("rl:admin-choice", || now), Some(Duration::from_secs(60)));
/// # Ok::<(), limiter_core::Error>(())
/// ```
#[derive(Debug)]
pub struct BlockList {
    /// How many keys hold a block (ended ones too, until swept).
    len: AtomicUsize,
    /// How many of those are address keys (see [`holds_addresses`](Self::holds_addresses)).
    addresses: AtomicUsize,
    /// How many blocks of each origin this list counts in the process's
    /// `limiter_blocks` gauge.
    gauged: [AtomicUsize; 2],
    entries: Mutex<Entries>,
}

impl Default for BlockList {
    fn default() -> Self {
        Self::with_max_penalty_blocks(DEFAULT_MAX_PENALTY_BLOCKS)
    }
}

impl BlockList {
    /// An empty list keeping at most [`DEFAULT_MAX_PENALTY_BLOCKS`] penalty blocks.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list keeping at most `max` penalty blocks (at least 1: a
    /// penalty always blocks its offender).
    pub fn with_max_penalty_blocks(max: usize) -> Self {
        Self {
            len: AtomicUsize::new(0),
            addresses: AtomicUsize::new(0),
            gauged: [AtomicUsize::new(0), AtomicUsize::new(0)],
            entries: Mutex::new(Entries::new(max)),
        }
    }

    /// Keeps at most `max` penalty blocks from now on (at least 1), the
    /// soonest-ending ones evicted at once if more are held.
    pub fn set_max_penalty_blocks(&self, max: usize) {
        let mut entries = self.lock();
        entries.max_penalty = max.max(1);
        entries.trim_penalties(None);
        self.publish(&entries);
    }

    /// How many penalty blocks the list keeps at most.
    pub fn max_penalty_blocks(&self) -> usize {
        self.lock().max_penalty
    }

    /// Blocks `key` for `duration` from `now`, replacing its block of the
    /// same `origin` (a block of the other origin stays). An operator block
    /// of a new key is refused ([`Error::Full`](crate::Error::Full)) when
    /// [`MAX_BLOCKS`] live ones are held; a penalty block is always kept,
    /// past the bound in place of the penalty block of another key that
    /// ends soonest.
    pub fn block(
        &self,
        key: &str,
        duration: Duration,
        origin: BlockOrigin,
        now: u64,
    ) -> Result<(), crate::Error> {
        let until = now.saturating_add(micros(duration));
        let mut entries = self.lock();
        entries.sweep(now);
        let set = entries.set(key, until, origin);
        if origin == BlockOrigin::Penalty {
            entries.trim_penalties(Some(key));
        }
        self.publish(&entries);
        set
    }

    /// Lifts `key`'s blocks, of both origins.
    pub fn unblock(&self, key: &str) {
        let mut entries = self.lock();
        entries.remove(key, BlockOrigin::Operator);
        entries.remove(key, BlockOrigin::Penalty);
        self.publish(&entries);
    }

    /// Replaces every block with `blocks` (key, time left from `now`,
    /// origin), within the same bounds: past the penalty bound the
    /// soonest-ending penalty blocks are dropped, past [`MAX_BLOCKS`] the
    /// further operator blocks.
    pub fn replace(
        &self,
        blocks: impl IntoIterator<Item = (String, Duration, BlockOrigin)>,
        now: u64,
    ) {
        let mut entries = self.lock();
        *entries = Entries::new(entries.max_penalty);
        for (key, left, origin) in blocks {
            if left.is_zero() {
                continue;
            }
            // An operator block past the bound was refused where it was set.
            let _ = entries.set(&key, now.saturating_add(micros(left)), origin);
        }
        entries.trim_penalties(None);
        self.publish(&entries);
    }

    /// Whether no key is blocked (expired blocks not yet swept count as
    /// blocked): one atomic load, for callers that skip the lookup.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// Whether any block (live, or ended and not yet swept) is an address
    /// key's: one whose part after its last `:` has no `=` (every other
    /// kind of identity carries a marker ending in `=`). One atomic load.
    #[inline]
    pub fn holds_addresses(&self) -> bool {
        self.addresses.load(Ordering::Acquire) > 0
    }

    /// How many blocks of `origin` are held (ended ones too, until swept).
    pub fn held(&self, origin: BlockOrigin) -> usize {
        self.lock().held(origin)
    }

    /// How long `key` stays blocked at `now` (read only when the list
    /// holds blocks); `None` when it is not.
    #[inline]
    pub fn blocked(&self, key: &str, now: impl FnOnce() -> u64) -> Option<Duration> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.blocked_at(key, now())
    }

    /// The live blocks at `now` in key order, of keys strictly after
    /// `after` (from the first when `None`), at most `max` of them (and
    /// at most [`MAX_BLOCKS_PAGE`]): pass the last key listed to read on.
    pub fn page(&self, after: Option<&str>, max: usize, now: u64) -> Vec<ListedBlock> {
        let max = max.min(MAX_BLOCKS_PAGE);
        let mut entries = self.lock();
        entries.sweep(now);
        self.publish(&entries);
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        entries
            .by_key
            .range::<str, _>((start, Bound::Unbounded))
            .filter_map(|(key, ends)| {
                let (until, origin) = ends.last()?;
                (until > now).then(|| ListedBlock {
                    key: key.to_string(),
                    left: Duration::from_micros(until - now),
                    origin,
                })
            })
            .take(max)
            .collect()
    }

    #[cold]
    fn blocked_at(&self, key: &str, now: u64) -> Option<Duration> {
        let mut entries = self.lock();
        if entries.sweep(now) {
            self.publish(&entries);
        }
        let (until, _) = entries.by_key.get(key)?.last()?;
        (until > now).then(|| Duration::from_micros(until - now))
    }

    /// Makes the counts the lock-free readers load, and the process's
    /// `limiter_blocks` gauge, match `entries`.
    fn publish(&self, entries: &Entries) {
        self.len.store(entries.by_key.len(), Ordering::Release);
        self.addresses.store(entries.addresses, Ordering::Release);
        for (origin, gauged) in ORIGINS.into_iter().zip(&self.gauged) {
            let held = entries.held(origin);
            gauge_change(origin, gauged.swap(held, Ordering::Relaxed), held);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // Every update leaves the entries whole before it can panic.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for BlockList {
    fn drop(&mut self) {
        for (origin, gauged) in ORIGINS.into_iter().zip(&self.gauged) {
            gauge_change(origin, gauged.load(Ordering::Relaxed), 0);
        }
    }
}

const ORIGINS: [BlockOrigin; 2] = [BlockOrigin::Operator, BlockOrigin::Penalty];

/// Moves the process's gauge of `origin`'s blocks from `before` to `after`
/// for one list: the gauge is the sum over every list in the process.
fn gauge_change(origin: BlockOrigin, before: usize, after: usize) {
    if before != after {
        metrics::gauge!("limiter_blocks", "origin" => origin.name())
            .increment(after as f64 - before as f64);
    }
}

#[path = "block_entries.rs"]
mod entries;

#[cfg(test)]
#[path = "blocks_tests.rs"]
mod tests;
