//! Blocks and unblocks another region did not confirm, delivered again in
//! the background until it does, so that an operator's change ends up in
//! every region without being repeated.
//!
//! Per region, the latest change of each key waits (a later change of the
//! key supersedes an earlier one, an unblock after a block; one the region
//! confirmed drops what waited), at most [`MAX_WAITING`] keys. Every
//! [`REDELIVER_EVERY`], while the region's breaker lets calls through,
//! what waits is sent again, each call within the peer deadline; a block
//! is sent with the time it has left, and one that ended meanwhile is
//! dropped (`control.rs` sends them). While changes wait for a region, its
//! changes, direct and redelivered, go one at a time, so a redelivered
//! block never lands after the unblock that superseded it; when nothing
//! waits (the usual case) they go at once.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use limiter_core::{BlockOrigin, Change};

/// The most keys whose change waits for one region; past it a new one is
/// not kept (logged, and counted in `limiter_region_outbox_dropped_total`):
/// the operator's error names the region, and repeating the change
/// completes it.
pub const MAX_WAITING: usize = 10_000;

/// How often what waits is sent again.
pub const REDELIVER_EVERY: Duration = Duration::from_millis(500);

/// The longest block the outbox counts down.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A change of a key, as it waits for a region.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Waiting {
    Block { ends: Instant, origin: BlockOrigin },
    Unblock,
}

impl Waiting {
    /// What `change` asks of a key, if it is a block or an unblock.
    pub(crate) fn of(change: &Change<'_>) -> Option<Self> {
        match *change {
            Change::Block {
                duration, origin, ..
            } => Some(Self::Block {
                // A block past a century is one for good: capped, so that
                // the end is a time (`Duration::MAX` would overflow it).
                ends: Instant::now() + duration.min(CENTURY),
                origin,
            }),
            Change::Unblock { .. } => Some(Self::Unblock),
            _ => None,
        }
    }

    /// The change to send now for `key`; `None` for a block that ended.
    pub(crate) fn change<'a>(&self, key: &'a str) -> Option<Change<'a>> {
        match *self {
            Self::Block { ends, origin } => {
                let duration = ends.checked_duration_since(Instant::now())?;
                (!duration.is_zero()).then_some(Change::Block {
                    key,
                    duration,
                    origin,
                })
            }
            Self::Unblock => Some(Change::Unblock { key }),
        }
    }
}

/// One region's waiting changes, and its turn to be sent changes.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    waiting: Mutex<HashMap<Box<str>, (u64, Waiting)>>,
    /// Held while a change is sent to the region, when some wait.
    pub(crate) turn: tokio::sync::Mutex<()>,
}

impl Outbox {
    fn waiting(&self) -> MutexGuard<'_, HashMap<Box<str>, (u64, Waiting)>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The change numbered `number` of `key` was not confirmed: it waits,
    /// unless a later change of the key does. `false` when it could not be
    /// kept (the outbox is full).
    pub(crate) fn wait(&self, key: &str, number: u64, change: Waiting) -> bool {
        let mut waiting = self.waiting();
        let full = waiting.len() >= MAX_WAITING;
        match waiting.get_mut(key) {
            Some((later, _)) if *later > number => true,
            Some(entry) => {
                *entry = (number, change);
                true
            }
            None if full => false,
            None => {
                waiting.insert(key.into(), (number, change));
                true
            }
        }
    }

    /// The change numbered `number` of `key` was confirmed (or refused
    /// there, an answer): an earlier one waits no more.
    pub(crate) fn settled(&self, key: &str, number: u64) {
        let mut waiting = self.waiting();
        if waiting.get(key).is_some_and(|(waits, _)| *waits <= number) {
            waiting.remove(key);
        }
    }

    /// How many keys' changes wait.
    pub(crate) fn len(&self) -> usize {
        self.waiting().len()
    }

    /// What waits now: each key, its change's number and the change.
    pub(crate) fn snapshot(&self) -> Vec<(Box<str>, u64, Waiting)> {
        let waiting = self.waiting();
        (waiting.iter())
            .map(|(key, (number, change))| (key.clone(), *number, *change))
            .collect()
    }

    /// Whether the change numbered `number` of `key` is the one waiting.
    pub(crate) fn is_waiting(&self, key: &str, number: u64) -> bool {
        self.waiting()
            .get(key)
            .is_some_and(|(waits, _)| *waits == number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_change_of_a_key_supersedes_an_earlier_one() {
        let outbox = Outbox::default();
        let block = Waiting::Block {
            ends: Instant::now() + Duration::from_secs(60),
            origin: BlockOrigin::Operator,
        };
        assert!(outbox.wait("k", 1, block));
        assert!(outbox.wait("k", 2, Waiting::Unblock));
        assert!(matches!(outbox.snapshot()[..], [(_, 2, Waiting::Unblock)]));
        // An earlier change that fails late does not replace it.
        assert!(outbox.wait("k", 1, block));
        assert!(matches!(outbox.snapshot()[..], [(_, 2, Waiting::Unblock)]));
        // Confirming an earlier one leaves the later one waiting.
        outbox.settled("k", 1);
        assert_eq!(outbox.len(), 1);
        // A later change confirmed: nothing waits.
        outbox.settled("k", 3);
        assert_eq!(outbox.len(), 0);
    }

    #[test]
    fn the_outbox_is_bounded() {
        let outbox = Outbox::default();
        for i in 0..MAX_WAITING {
            assert!(outbox.wait(&i.to_string(), 1, Waiting::Unblock));
        }
        assert!(!outbox.wait("one more", 1, Waiting::Unblock));
        // A key already waiting is still replaced.
        assert!(outbox.wait("0", 2, Waiting::Unblock));
        assert_eq!(outbox.len(), MAX_WAITING);
    }

    #[test]
    fn a_block_for_good_waits_without_overflowing() {
        let change = Change::Block {
            key: "k",
            duration: Duration::MAX,
            origin: BlockOrigin::Operator,
        };
        let waiting = Waiting::of(&change).unwrap();
        assert!(matches!(
            waiting.change("k"),
            Some(Change::Block { duration, .. }) if duration > CENTURY - Duration::from_secs(60)
        ));
    }

    #[test]
    fn a_block_that_ended_is_not_sent() {
        let ended = Waiting::Block {
            ends: Instant::now(),
            origin: BlockOrigin::Operator,
        };
        assert!(ended.change("k").is_none());
        let left = Waiting::Block {
            ends: Instant::now() + Duration::from_secs(60),
            origin: BlockOrigin::Penalty,
        };
        assert!(matches!(
            left.change("k"),
            Some(Change::Block { duration, origin: BlockOrigin::Penalty, .. })
                if duration <= Duration::from_secs(60) && duration > Duration::from_secs(59)
        ));
    }
}
