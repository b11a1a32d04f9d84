//! Ghosts: what a shard keeps of the state it evicts, so that a key that
//! comes back is not given a fresh quota while its old state could still
//! deny it, and a key that never left is not mistaken for one that did.
//!
//! Each table remembers its evicted keys in two places, both allocated at
//! its first eviction (a store that never fills pays nothing):
//! - **exactly, by fingerprint**: the key's 64-bit hash (seeded per store,
//!   so nobody can aim keys at one another) with its state and expiry, in a
//!   table of up to [`REMEMBERED_PER_KEY`] times the shard's capacity (a
//!   sliding log weighs one more key for every 16 of its entries). A key
//!   that returns gets exactly its state back; a key whose hash is not
//!   there was not remembered there, so a new key starts afresh whatever a
//!   flood of other keys left behind;
//! - **coarsely, in slots**, only for what the exact table cannot hold
//!   (after expired entries are dropped, the entries that expire soonest
//!   move out, an eighth at a time). A slot, chosen by the key's hash,
//!   takes one key's state exactly, or merges several conservatively: the
//!   merge, read under the policy of any key whose state went into it,
//!   denies at least what that key's own state would deny, at every later
//!   time, and lasts until the latest of their expiries. A key not found in
//!   the exact table whose slot is merged inherits a copy of the merge (its
//!   own state may be in it); one whose slot holds another single key's
//!   state starts afresh (its own state cannot be there: it would have made
//!   the slot merged).
//!
//! So only a flood of more live evicted keys than the exact table holds
//! (by default four times the capacity, all of them within their windows)
//! can make a new key inherit a merge, and then only until the merged
//! states expire.
//!
//! The merges, one per kind of state, live beside their algorithms: buckets
//! (and GCRA, whose state is a bucket's water) keep the time they are all
//! empty, sliding logs the later of their i-th newest entries, sliding window
//! counters the larger counts of windows of one length, fixed windows the
//! largest count (a key inheriting it has its window restarted). A key never
//! inherits more than its own policy's whole quota used now: its own state
//! could hold no more. (These caps count from now: they assume that a key's
//! checks do not go back in time.)

use std::mem;
use std::num::NonZeroU64;

use hashbrown::HashTable;

use crate::algorithm::Micros;
use crate::algorithm::bucket::Level;
use crate::algorithm::fixed_window::Window;
use crate::algorithm::sliding_log::{self, Log};
use crate::algorithm::sliding_window::{self, Counters};

/// How many evicted keys a table remembers exactly, per key of capacity.
pub(super) const REMEMBERED_PER_KEY: usize = 4;

/// A kind of state that can be kept in a ghost slot.
pub(super) trait Evictable: Sized {
    /// What a slot keeps: one key's exact state, or a merge of several.
    type Summary: Default;
    /// One key's state, which expires at `expires_at`, kept exactly.
    fn summarize(self, expires_at: Micros) -> Self::Summary;
    /// The state back from its exact summary.
    fn restore(summary: Self::Summary) -> Self;
    /// Merges `other` into `into`; the slot's expiry becomes the later one.
    fn merge(into: &mut Self::Summary, other: Self::Summary);
    /// What remembering one summary exactly counts against the bound: one
    /// key, and a sliding log one more for every 16 entries it holds (8
    /// bytes each), so that the bound is one of memory too: long logs
    /// cannot make the table hold many times what it holds for others.
    fn weight(_summary: &Self::Summary) -> usize {
        1
    }
}

/// The ghosts of one table.
pub(super) struct Ghosts<S: Evictable> {
    /// Evicted keys' exact states, by hash; empty until the first eviction.
    remembered: HashTable<Remembered<S::Summary>>,
    /// The weight of what `remembered` holds (see [`Evictable::weight`]).
    weight: usize,
    /// What overflowed `remembered`; empty until it first overflows.
    slots: Box<[Ghost<S::Summary>]>,
}

/// One evicted key's exact state.
struct Remembered<M> {
    hash: u64,
    /// At or after this instant the state means nothing.
    expires_at: Micros,
    summary: M,
}

#[derive(Default)]
struct Ghost<M> {
    /// The hash of the one key whose exact state this is; `None` once
    /// several were merged (or for the rare key whose hash is 0, whose state
    /// is then only ever inherited: the conservative reading).
    owner: Option<NonZeroU64>,
    /// At or after this instant the slot is empty.
    expires_at: Micros,
    summary: M,
}

// The sizes `MemoryStore::with_capacity` documents.
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<Remembered<Level>>() == 40 && size_of::<Remembered<Window>>() == 32);
    assert!(size_of::<Remembered<sliding_window::Evicted>>() == 48);
    assert!(size_of::<Remembered<Log>>() == 48);
    assert!(size_of::<Ghost<Level>>() == 40 && size_of::<Ghost<Window>>() == 32);
    assert!(size_of::<Ghost<sliding_window::Evicted>>() == 48);
    assert!(size_of::<Ghost<Log>>() == 48);
};

/// What a key new to its table finds among the ghosts.
pub(super) enum Haunt<'a, S: Evictable> {
    /// Nothing of its own: it starts afresh.
    Nothing,
    /// Its own state, exactly (now forgotten by the ghosts).
    Exact(S),
    /// A merge that may hold its state.
    Merged {
        summary: &'a S::Summary,
        expires_at: Micros,
    },
}

impl<S: Evictable> Default for Ghosts<S> {
    fn default() -> Self {
        Self {
            remembered: HashTable::new(),
            weight: 0,
            slots: Box::default(),
        }
    }
}

/// How many ghosts a table keeps: `remembered` exactly, then `slots` slots.
#[derive(Debug, Clone, Copy)]
pub(super) struct GhostBounds {
    pub(super) remembered: usize,
    pub(super) slots: usize,
}

impl<S: Evictable> Ghosts<S> {
    /// Keeps the evicted state of the key with `hash`: exactly, unless the
    /// exact table is full of states that have not expired.
    pub(super) fn bury(
        &mut self,
        hash: u64,
        expires_at: Micros,
        state: S,
        now: Micros,
        bounds: GhostBounds,
    ) {
        if expires_at <= now {
            return;
        }
        let summary = state.summarize(expires_at);
        if let Ok(twin) = self.remembered.find_entry(hash, |r| r.hash == hash) {
            // Two keys of one 64-bit hash: neither can be told apart, so
            // both go to their (common) slot, which merges them.
            let (twin, _) = twin.remove();
            self.weight -= S::weight(&twin.summary);
            self.bury_coarsely(hash, twin.expires_at, twin.summary, now, bounds.slots);
            self.bury_coarsely(hash, expires_at, summary, now, bounds.slots);
            return;
        }
        let weight = S::weight(&summary);
        if self.weight + weight > bounds.remembered {
            self.make_room(now, bounds);
        }
        if self.weight + weight > bounds.remembered {
            self.bury_coarsely(hash, expires_at, summary, now, bounds.slots);
            return;
        }
        self.weight += weight;
        self.remembered.insert_unique(
            hash,
            Remembered {
                hash,
                expires_at,
                summary,
            },
            |r| r.hash,
        );
    }

    /// Drops the expired exact states; when that frees less than an eighth
    /// of the table, moves the eighth that expires soonest to the slots, so
    /// the cost is amortized over the evictions that fill it again.
    #[cold]
    fn make_room(&mut self, now: Micros, bounds: GhostBounds) {
        self.forget_expired(now);
        let batch = (bounds.remembered / 8).max(1);
        if self.weight + batch <= bounds.remembered || self.remembered.is_empty() {
            return;
        }
        let mut expiries: Vec<Micros> = self.remembered.iter().map(|r| r.expires_at).collect();
        let batch = batch.min(expiries.len());
        let (_, &mut threshold, _) = expiries.select_nth_unstable(batch - 1);
        let mut moved = 0;
        let gone: Vec<Remembered<S::Summary>> = self
            .remembered
            .extract_if(|r| {
                let out = r.expires_at < threshold || (r.expires_at == threshold && moved < batch);
                moved += usize::from(out);
                out
            })
            .collect();
        for r in gone {
            self.weight -= S::weight(&r.summary);
            self.bury_coarsely(r.hash, r.expires_at, r.summary, now, bounds.slots);
        }
    }

    fn bury_coarsely(
        &mut self,
        hash: u64,
        expires_at: Micros,
        summary: S::Summary,
        now: Micros,
        slots: usize,
    ) {
        if self.slots.is_empty() {
            self.slots = (0..slots.max(1)).map(|_| Ghost::default()).collect();
        }
        let slot = &mut self.slots[index(hash, self.slots.len())];
        if slot.expires_at <= now {
            *slot = Ghost {
                owner: NonZeroU64::new(hash),
                expires_at,
                summary,
            };
        } else {
            S::merge(&mut slot.summary, summary);
            slot.owner = None;
            slot.expires_at = slot.expires_at.max(expires_at);
        }
    }

    /// What the key with `hash`, arriving at `now`, finds among the ghosts.
    #[inline]
    pub(super) fn visit(&mut self, hash: u64, now: Micros) -> Haunt<'_, S> {
        if self.remembered.is_empty() && self.slots.is_empty() {
            return Haunt::Nothing;
        }
        if let Ok(found) = self.remembered.find_entry(hash, |r| r.hash == hash) {
            // Its latest state: whatever it inherited before is in it.
            let (found, _) = found.remove();
            self.weight -= S::weight(&found.summary);
            return if found.expires_at > now {
                Haunt::Exact(S::restore(found.summary))
            } else {
                Haunt::Nothing
            };
        }
        if self.slots.is_empty() {
            return Haunt::Nothing;
        }
        let slot = &mut self.slots[index(hash, self.slots.len())];
        if slot.expires_at <= now {
            // Frees an expired merge's memory early.
            *slot = Ghost::default();
            return Haunt::Nothing;
        }
        match slot.owner {
            Some(owner) if owner.get() == hash => Haunt::Exact(S::restore(mem::take(slot).summary)),
            Some(_) => Haunt::Nothing,
            None => Haunt::Merged {
                summary: &slot.summary,
                expires_at: slot.expires_at,
            },
        }
    }

    /// Drops the exact state of the key with `hash` (a key reused with
    /// another algorithm starts afresh); a merge stays.
    pub(super) fn forget(&mut self, hash: u64) {
        if let Ok(found) = self.remembered.find_entry(hash, |r| r.hash == hash) {
            let (found, _) = found.remove();
            self.weight -= S::weight(&found.summary);
        }
        if self.slots.is_empty() {
            return;
        }
        let slot = &mut self.slots[index(hash, self.slots.len())];
        if slot.owner.is_some_and(|owner| owner.get() == hash) {
            *slot = Ghost::default();
        }
    }

    /// Empties the ghosts that have expired, freeing what they held, and
    /// the slots' array once none is left.
    pub(super) fn sweep(&mut self, now: Micros) {
        self.forget_expired(now);
        if self.remembered.len() < self.remembered.capacity() / 4 {
            self.remembered.shrink_to_fit(|r| r.hash);
        }
        let mut live = false;
        for slot in self.slots.iter_mut() {
            if slot.expires_at <= now {
                if slot.expires_at != 0 {
                    *slot = Ghost::default();
                }
            } else {
                live = true;
            }
        }
        if !live {
            self.slots = Box::default();
        }
    }

    /// Drops the exact states that have expired.
    fn forget_expired(&mut self, now: Micros) {
        let weight = &mut self.weight;
        self.remembered.retain(|r| {
            let live = r.expires_at > now;
            if !live {
                *weight -= S::weight(&r.summary);
            }
            live
        });
    }

    /// Ghosts (exact states and slots) that have not expired.
    #[cfg(test)]
    pub(super) fn live(&self, now: Micros) -> usize {
        self.remembered
            .iter()
            .filter(|r| r.expires_at > now)
            .count()
            + self.slots.iter().filter(|s| s.expires_at > now).count()
    }

    /// Bytes held for the exact states (the table's buckets).
    pub(super) fn remembered_bytes(&self) -> usize {
        self.remembered.allocation_size()
    }

    /// Exact states held.
    pub(super) fn remembered_len(&self) -> usize {
        self.remembered.len()
    }
}

/// The slot of `hash` among `len`: the hash's high bits, scaled.
#[inline]
pub(super) fn index(hash: u64, len: usize) -> usize {
    ((u128::from(hash) * len as u128) >> 64) as usize
}

/// Buckets and GCRA: a merge keeps only the slot's expiry, when every bucket in it is
/// empty; a key inherits the level that empties then (`bucket::empty_by`).
impl Evictable for Level {
    type Summary = Level;

    fn summarize(self, _: Micros) -> Level {
        self
    }

    fn restore(level: Level) -> Level {
        level
    }

    fn merge(into: &mut Level, _: Level) {
        *into = Level::default();
    }
}

/// Fixed windows: a merge keeps the largest count (`fixed_window::inherit`
/// restarts the window).
impl Evictable for Window {
    type Summary = Window;

    fn summarize(self, _: Micros) -> Window {
        self
    }

    fn restore(window: Window) -> Window {
        window
    }

    fn merge(into: &mut Window, other: Window) {
        *into = Window {
            count: into.count.max(other.count),
            start: 0,
        };
    }
}

impl Evictable for Counters {
    type Summary = sliding_window::Evicted;

    fn summarize(self, expires_at: Micros) -> Self::Summary {
        sliding_window::Evicted::new(self, expires_at)
    }

    fn restore(evicted: Self::Summary) -> Counters {
        evicted.counters
    }

    fn merge(into: &mut Self::Summary, other: Self::Summary) {
        into.merge(other);
    }
}

impl Evictable for Log {
    type Summary = Log;

    fn summarize(self, _: Micros) -> Log {
        self
    }

    fn restore(log: Log) -> Log {
        log
    }

    fn merge(into: &mut Log, other: Log) {
        sliding_log::merge(into, other);
    }

    fn weight(log: &Log) -> usize {
        1 + log.len() / 16
    }
}
