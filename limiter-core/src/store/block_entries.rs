//! The blocks of a [`BlockList`](super::BlockList), by key and by end time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::{BlockOrigin, MAX_BLOCKS};

/// When a key's blocks of each origin end (µs).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Ends {
    operator: Option<u64>,
    penalty: Option<u64>,
}

impl Ends {
    fn of(&mut self, origin: BlockOrigin) -> &mut Option<u64> {
        match origin {
            BlockOrigin::Operator => &mut self.operator,
            BlockOrigin::Penalty => &mut self.penalty,
        }
    }

    /// The later end and its origin (the operator's on a tie).
    pub(super) fn last(&self) -> Option<(u64, BlockOrigin)> {
        match (self.operator, self.penalty) {
            (Some(o), Some(p)) if p > o => Some((p, BlockOrigin::Penalty)),
            (Some(o), _) => Some((o, BlockOrigin::Operator)),
            (None, Some(p)) => Some((p, BlockOrigin::Penalty)),
            (None, None) => None,
        }
    }
}

/// The blocks, by key (for lookups and pages) and by end time per origin
/// (to sweep ended ones and evict the soonest-ending penalty block).
#[derive(Debug)]
pub(super) struct Entries {
    pub(super) by_key: BTreeMap<Arc<str>, Ends>,
    operator_ends: BTreeSet<(u64, Arc<str>)>,
    penalty_ends: BTreeSet<(u64, Arc<str>)>,
    /// How many keys of `by_key` are address keys.
    pub(super) addresses: usize,
    pub(super) max_penalty: usize,
}

impl Entries {
    pub(super) fn new(max_penalty: usize) -> Self {
        Self {
            by_key: BTreeMap::new(),
            operator_ends: BTreeSet::new(),
            penalty_ends: BTreeSet::new(),
            addresses: 0,
            max_penalty: max_penalty.max(1),
        }
    }

    /// How many blocks of `origin` are held (ended ones too, until swept).
    pub(super) fn held(&self, origin: BlockOrigin) -> usize {
        match origin {
            BlockOrigin::Operator => self.operator_ends.len(),
            BlockOrigin::Penalty => self.penalty_ends.len(),
        }
    }

    pub(super) fn index(&mut self, origin: BlockOrigin) -> &mut BTreeSet<(u64, Arc<str>)> {
        match origin {
            BlockOrigin::Operator => &mut self.operator_ends,
            BlockOrigin::Penalty => &mut self.penalty_ends,
        }
    }

    /// Sets `key`'s block of `origin` to end at `until`; refuses a new
    /// operator block past [`MAX_BLOCKS`].
    pub(super) fn set(
        &mut self,
        key: &str,
        until: u64,
        origin: BlockOrigin,
    ) -> Result<(), crate::Error> {
        let held = self.by_key.get_key_value(key);
        let had = held.and_then(|(_, ends)| match origin {
            BlockOrigin::Operator => ends.operator,
            BlockOrigin::Penalty => ends.penalty,
        });
        if origin == BlockOrigin::Operator
            && had.is_none()
            && self.operator_ends.len() >= MAX_BLOCKS
        {
            return Err(full());
        }
        let name: Arc<str> = match held {
            Some((name, _)) => Arc::clone(name),
            None => {
                self.addresses += usize::from(crate::key::names_address(key));
                Arc::from(key)
            }
        };
        let index = self.index(origin);
        if let Some(old) = had {
            index.remove(&(old, Arc::clone(&name)));
        }
        index.insert((until, Arc::clone(&name)));
        *self.by_key.entry(name).or_default().of(origin) = Some(until);
        Ok(())
    }

    /// Lifts `key`'s block of `origin`; the key goes when it has none left.
    pub(super) fn remove(&mut self, key: &str, origin: BlockOrigin) {
        let Some((name, ends)) = self.by_key.get_key_value(key) else {
            return;
        };
        let name = Arc::clone(name);
        let mut ends = *ends;
        let Some(until) = ends.of(origin).take() else {
            return;
        };
        self.index(origin).remove(&(until, Arc::clone(&name)));
        if ends.last().is_none() {
            self.by_key.remove(key);
            self.addresses -= usize::from(crate::key::names_address(key));
        } else {
            self.by_key.insert(name, ends);
        }
    }

    /// Removes every block ended at `now`; answers whether any was.
    pub(super) fn sweep(&mut self, now: u64) -> bool {
        let mut swept = false;
        for origin in [BlockOrigin::Operator, BlockOrigin::Penalty] {
            while let Some((until, key)) = self.index(origin).first().cloned() {
                if until > now {
                    break;
                }
                self.remove(&key, origin);
                swept = true;
            }
        }
        swept
    }

    /// Evicts the soonest-ending penalty blocks past the bound, never
    /// `keep`'s (the offender just blocked).
    pub(super) fn trim_penalties(&mut self, keep: Option<&str>) {
        while self.penalty_ends.len() > self.max_penalty {
            let soonest = self
                .penalty_ends
                .iter()
                .find(|(_, key)| Some(&**key) != keep)
                .map(|(_, key)| Arc::clone(key));
            let Some(key) = soonest else { return };
            self.remove(&key, BlockOrigin::Penalty);
        }
    }
}

/// The refusal of an operator block past [`MAX_BLOCKS`].
fn full() -> crate::Error {
    crate::Error::Full(format!(
        "{MAX_BLOCKS} operator blocks are held already: lift one before blocking another key"
    ))
}

pub(super) fn micros(duration: Duration) -> u64 {
    duration.as_micros().try_into().unwrap_or(u64::MAX)
}
