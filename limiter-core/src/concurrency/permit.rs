//! A permit: a request's place among a key's requests in flight, given back
//! when it is dropped.

use std::fmt;

use tokio::task::AbortHandle;

use super::ConcurrencyLimit;
use crate::{Decision, RuleStatus};

/// The answer to a request for a [`Permit`]: the permit, or the denial.
#[derive(Debug)]
pub enum Acquired {
    /// The request may proceed while it holds the permit.
    Permit(Permit),
    /// As many requests as the limit allows are in flight.
    Denied(Decision),
}

impl Acquired {
    /// Whether a permit was taken.
    pub fn allowed(&self) -> bool {
        matches!(self, Self::Permit(_))
    }

    /// The decision: the limit, how many more requests may start now, and
    /// for a denial when to retry ([`ConcurrencyLimit::RETRY_AFTER`]).
    pub fn decision(&self) -> &Decision {
        match self {
            Self::Permit(permit) => permit.decision(),
            Self::Denied(decision) => decision,
        }
    }

    /// The permit, when one was taken.
    pub fn permit(self) -> Option<Permit> {
        match self {
            Self::Permit(permit) => Some(permit),
            Self::Denied(_) => None,
        }
    }
}

/// A request's place among the requests of a key in flight.
///
/// Dropping it gives the place back: at once in the memory store, in a
/// task of its own on a shared store (a permit dropped outside a Tokio
/// runtime is not given back, and its lease expires instead). While it is
/// held on a shared store, a task renews its lease every third of the
/// lease; the task ends with the permit.
pub struct Permit {
    decision: Decision,
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
    renewal: Option<AbortHandle>,
}

impl Permit {
    /// A permit given back by `release`.
    pub fn new(decision: Decision, release: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            decision,
            release: Some(Box::new(release)),
            renewal: None,
        }
    }

    /// The same permit, its lease renewed by `task` until it is dropped.
    pub fn renewed_by(mut self, task: AbortHandle) -> Self {
        self.renewal = Some(task);
        self
    }

    /// A permit that holds nothing: the store failed and the failure
    /// policy lets the request through.
    pub(crate) fn unchecked(limit: &ConcurrencyLimit) -> Self {
        Self {
            decision: decision(limit, limit.max() - 1, false),
            release: None,
            renewal: None,
        }
    }

    /// The decision that granted it.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Gives the permit back now (the same as dropping it).
    pub fn release(self) {}
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("decision", &self.decision)
            .field("holds", &self.release.is_some())
            .finish_non_exhaustive()
    }
}

/// The decision of a request for a permit: allowed with `remaining` more
/// places free, or denied (none free) with the retry time. When no place
/// is free, more quota may come after the retry time (when a request in
/// flight ends is unknown).
pub fn decision(limit: &ConcurrencyLimit, remaining: u64, denied: bool) -> Decision {
    let retry_after_us = ConcurrencyLimit::RETRY_AFTER.as_micros() as u64;
    let status = RuleStatus::new(remaining, if remaining == 0 { retry_after_us } else { 0 });
    Decision::single(
        limit.quota(),
        status,
        denied.then_some(retry_after_us),
        0,
        0,
    )
}
