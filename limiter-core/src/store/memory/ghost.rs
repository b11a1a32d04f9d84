//! Ghosts: what a shard keeps of the state it evicts, so that a key that
//! comes back is not given a fresh quota while its old state could still
//! deny it.
//!
//! Each table has a fixed array of ghost slots, allocated at its first
//! eviction (a store that never fills pays nothing) and indexed by the key's
//! hash, which is seeded per store, so nobody can aim keys at one slot. An
//! evicted state goes to its slot:
//! - an empty slot (or one whose state has expired) takes it exactly, with
//!   the key's 64-bit hash: the key gets exactly that state back when it
//!   returns, and the slot is emptied;
//! - a slot that is taken merges it, conservatively: the merge, read under
//!   the policy of any key whose state went into it, denies at least what
//!   that key's own state would deny, at every later time, and lasts until
//!   the latest of their expiries. A returning key whose slot is merged
//!   inherits a copy of the merge (its own state may be in it); a returning
//!   key whose slot holds another single key's state starts afresh (its own
//!   state cannot be there: it would have made the slot merged).
//!
//! The merges, one per kind of state, live beside their algorithms: buckets
//! (and GCRA, whose state is a bucket's water) keep the time they are all
//! empty, sliding logs the later of their i-th newest entries, sliding window
//! counters the larger counts of windows of one length, fixed windows the
//! largest count (a key inheriting it has its window restarted). A key never
//! inherits more than its own policy's whole quota used now: its own state
//! could hold no more. (These caps count from now: they assume that a key's
//! checks do not go back in time.)
//!
//! Merges only grow: a key that inherits a merge, adds requests and is
//! evicted again is merged back with them. Under a long flood of keys sharing
//! slots, merges tend towards the whole quota used, and keys arriving in
//! such slots (new ones, or evicted ones coming back) are held to their
//! policy's sustained rate until the flood's state expires: the price of never
//! handing out a fresh quota. Keys in use stay live and are not affected.

use std::mem;
use std::num::NonZeroU64;

use crate::algorithm::Micros;
use crate::algorithm::bucket::Level;
use crate::algorithm::fixed_window::Window;
use crate::algorithm::sliding_log::{self, Log};
use crate::algorithm::sliding_window::{self, Counters};

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
}

/// The ghost slots of one table.
pub(super) struct Ghosts<S: Evictable> {
    /// Empty until the table's first eviction.
    slots: Box<[Ghost<S::Summary>]>,
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
    assert!(size_of::<Ghost<Level>>() == 40 && size_of::<Ghost<Window>>() == 32);
    assert!(size_of::<Ghost<sliding_window::Evicted>>() == 48);
    assert!(size_of::<Ghost<Log>>() == 48);
};

/// What a key new to its table finds in its slot.
pub(super) enum Haunt<'a, S: Evictable> {
    /// Nothing of its own: it starts afresh.
    Nothing,
    /// Its own state, exactly (the slot is now empty).
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
            slots: Box::default(),
        }
    }
}

impl<S: Evictable> Ghosts<S> {
    /// Keeps the evicted state of the key with `hash`; allocates `slots`
    /// slots if this is the table's first eviction.
    pub(super) fn bury(
        &mut self,
        hash: u64,
        expires_at: Micros,
        state: S,
        now: Micros,
        slots: usize,
    ) {
        if expires_at <= now {
            return;
        }
        if self.slots.is_empty() {
            self.slots = (0..slots.max(1)).map(|_| Ghost::default()).collect();
        }
        let slot = &mut self.slots[index(hash, self.slots.len())];
        let summary = state.summarize(expires_at);
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

    /// What the key with `hash`, arriving at `now`, finds in its slot.
    #[inline]
    pub(super) fn visit(&mut self, hash: u64, now: Micros) -> Haunt<'_, S> {
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
        if self.slots.is_empty() {
            return;
        }
        let slot = &mut self.slots[index(hash, self.slots.len())];
        if slot.owner.is_some_and(|owner| owner.get() == hash) {
            *slot = Ghost::default();
        }
    }

    /// Empties the slots that have expired, freeing what they held, and the
    /// whole array once none is left.
    pub(super) fn sweep(&mut self, now: Micros) {
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

    /// Slots whose state has not expired.
    #[cfg(test)]
    pub(super) fn live(&self, now: Micros) -> usize {
        self.slots.iter().filter(|s| s.expires_at > now).count()
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
}
