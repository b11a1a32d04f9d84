//! The memory store's penalty states: one per identity and limit, kept
//! while it can still earn or escalate a block, at most [`MAX_PENALIZED`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::penalty::{Penalty, PenaltyState};

/// The most penalty states kept. Past it, expired ones are swept; while
/// it stays full of live ones, a new identity's denials are not counted
/// (its rate limits still hold): a flood of distinct identities cannot
/// grow memory.
pub(crate) const MAX_PENALIZED: usize = 100_000;

#[derive(Default)]
pub(crate) struct Penalized {
    states: Mutex<HashMap<Box<str>, (PenaltyState, u64)>>,
}

impl Penalized {
    /// Forgets `key`'s state.
    pub(crate) fn forget(&self, key: &str) {
        self.states
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Records a denial of `key` at `now`; the block it earns, if any.
    pub(crate) fn record(&self, key: &str, penalty: &Penalty, now: u64) -> Option<Duration> {
        let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        if !states.contains_key(key) && states.len() >= MAX_PENALIZED {
            states.retain(|_, (_, expires)| *expires > now);
            if states.len() >= MAX_PENALIZED {
                return None;
            }
        }
        let (state, expires) = states.entry(key.into()).or_default();
        if *expires <= now {
            *state = PenaltyState::default();
        }
        let block = state.record(penalty, now);
        *expires = state.expires_at(penalty);
        block
    }
}
