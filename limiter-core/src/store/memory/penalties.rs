//! The memory store's penalty states: one per identity and limit, kept
//! while it can still earn or escalate a block, at most [`MAX_PENALIZED`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Penalty, PenaltyState};

/// The most penalty states kept. Past it, the state that expires soonest
/// gives way to the new identity's: a flood of distinct identities cannot
/// grow memory, nor stop a later offender's denials from being counted
/// (what it can do is forget the stalest counts, which were about to
/// expire anyway).
pub(crate) const MAX_PENALIZED: usize = 100_000;

#[derive(Default)]
pub(crate) struct Penalized {
    states: Mutex<States>,
}

/// The states by key, and their keys by when each expires (µs): the one
/// that gives way is found in O(log n).
#[derive(Default)]
struct States {
    by_key: HashMap<Arc<str>, (PenaltyState, u64)>,
    by_expiry: BTreeSet<(u64, Arc<str>)>,
}

impl Penalized {
    /// Forgets `key`'s state.
    pub(crate) fn forget(&self, key: &str) {
        let mut states = self.lock();
        if let Some((key, (_, expires))) = states.by_key.remove_entry(key) {
            states.by_expiry.remove(&(expires, key));
        }
    }

    /// Records a denial of `key` at `now`; the block it earns, if any.
    pub(crate) fn record(&self, key: &str, penalty: &Penalty, now: u64) -> Option<Duration> {
        self.record_within(key, penalty, now, MAX_PENALIZED)
    }

    /// [`record`](Self::record) with at most `max` states kept.
    fn record_within(
        &self,
        key: &str,
        penalty: &Penalty,
        now: u64,
        max: usize,
    ) -> Option<Duration> {
        let mut states = self.lock();
        let States { by_key, by_expiry } = &mut *states;
        let (key, (mut state, expires)) = match by_key.remove_entry(key) {
            Some(entry) => entry,
            None => (Arc::from(key), (PenaltyState::default(), 0)),
        };
        by_expiry.remove(&(expires, Arc::clone(&key)));
        if expires <= now {
            state = PenaltyState::default();
        }
        // Room for this key: the soonest to expire (an ended one first) go.
        while by_key.len() >= max.max(1) {
            let Some((_, soonest)) = by_expiry.pop_first() else {
                break;
            };
            by_key.remove(&soonest);
        }
        let block = state.record(penalty, now);
        let expires = state.expires_at(penalty);
        by_expiry.insert((expires, Arc::clone(&key)));
        by_key.insert(key, (state, expires));
        block
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, States> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000;

    fn penalty() -> Penalty {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        Penalty::new(3, minutes(10), [minutes(15)]).unwrap()
    }

    /// A flood of identities with a denial each fills the states; a later
    /// offender's denials are still counted, and earn its block.
    #[test]
    fn a_flood_of_penalty_states_never_stops_a_later_offender() {
        let penalized = Penalized::default();
        let penalty = penalty();
        let max = 50;
        for i in 0..200 {
            let key = format!("rate_limit:user=made-up-{i}:replies:penalty");
            assert_eq!(
                penalized.record_within(&key, &penalty, i * SECOND, max),
                None
            );
        }
        assert_eq!(penalized.lock().by_key.len(), max);
        // The oldest gave way: the 50 newest are kept.
        assert!(
            !penalized
                .lock()
                .by_key
                .contains_key("rate_limit:user=made-up-149:replies:penalty")
        );
        assert!(
            penalized
                .lock()
                .by_key
                .contains_key("rate_limit:user=made-up-150:replies:penalty")
        );
        let offender = "rate_limit:user=offender:replies:penalty";
        let now = 200 * SECOND;
        assert_eq!(penalized.record_within(offender, &penalty, now, max), None);
        assert_eq!(
            penalized.record_within(offender, &penalty, now + 1, max),
            None
        );
        assert_eq!(
            penalized.record_within(offender, &penalty, now + 2, max),
            Some(Duration::from_secs(15 * 60))
        );
        let states = penalized.lock();
        assert_eq!(states.by_key.len(), max);
        assert_eq!(states.by_expiry.len(), max);
    }

    /// A known key's state is updated in place, its expiry moved in the
    /// index; a forgotten key leaves both.
    #[test]
    fn the_expiry_index_follows_each_state() {
        let penalized = Penalized::default();
        let penalty = penalty();
        let key = "rate_limit:user=alice:replies:penalty";
        penalized.record_within(key, &penalty, SECOND, 10);
        penalized.record_within(key, &penalty, 2 * SECOND, 10);
        {
            let states = penalized.lock();
            assert_eq!(states.by_key.len(), 1);
            let (_, expires) = states.by_key[key];
            assert_eq!(
                states.by_expiry.iter().next().map(|(e, _)| *e),
                Some(expires)
            );
            assert_eq!(states.by_expiry.len(), 1);
        }
        penalized.forget(key);
        let states = penalized.lock();
        assert!(states.by_key.is_empty() && states.by_expiry.is_empty());
    }
}
