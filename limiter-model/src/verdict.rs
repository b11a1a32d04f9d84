//! How a check was decided when the store may fail: the answer that says
//! which part decided ([`Verdict`]), beside the [`Decision`] itself.

use std::time::Duration;

use crate::decision::{Decider, Decision};

/// How a check was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// By the store.
    Store(Decision),
    /// By the local deny cache: the store denied this key earlier, until later than now.
    Cached(Decision),
    /// By the local fallback limiter, the store having failed or the breaker being open.
    Fallback(Decision),
    /// Let through unchecked, the store having failed (fail open).
    FailedOpen,
    /// Refused unchecked, the store having failed (fail closed); the store
    /// will be probed again after `retry_after`.
    FailedClosed {
        /// Until the breaker's next probe (at least one second).
        retry_after: Duration,
    },
}

impl Verdict {
    /// The verdict as `limiter_core::Store::check` answers it: a decision
    /// saying who made it ([`Decision::decider`]; failing open, an allowed
    /// decision with every quota of `policy` remaining), or, failing
    /// closed, [`Error::Unavailable`](crate::Error::Unavailable).
    /// [`Verdict::of`] reads it back.
    pub fn into_decision(self, policy: &crate::Policy) -> Result<Decision, crate::Error> {
        match self {
            // As the store says: a store may itself stand in for another
            // (a guard behind a guard).
            Self::Store(d) => Ok(d),
            Self::Cached(d) => Ok(d.by(Decider::DenyCache)),
            Self::Fallback(d) => Ok(d.by(Decider::Fallback)),
            Self::FailedOpen => Ok(Decision::unchecked(policy).by(Decider::FailedOpen)),
            Self::FailedClosed { retry_after } => Err(crate::Error::Unavailable(retry_after)),
        }
    }

    /// How a check that answered `checked` was decided: by who made the
    /// decision, or, for [`Error::Unavailable`](crate::Error::Unavailable)
    /// (the failure policy refusing), failed closed. Any other error stays
    /// an error.
    pub fn of(checked: Result<Decision, crate::Error>) -> Result<Self, crate::Error> {
        match checked {
            Ok(d) => Ok(match d.decider() {
                Decider::Store => Self::Store(d),
                Decider::DenyCache => Self::Cached(d),
                Decider::Fallback => Self::Fallback(d),
                Decider::FailedOpen => Self::FailedOpen,
            }),
            Err(crate::Error::Unavailable(retry_after)) => Ok(Self::FailedClosed { retry_after }),
            Err(error) => Err(error),
        }
    }

    /// The decision, when there is one.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Self::Store(d) | Self::Cached(d) | Self::Fallback(d) => Some(d),
            Self::FailedOpen | Self::FailedClosed { .. } => None,
        }
    }

    /// Whether the request may proceed.
    pub fn allowed(&self) -> bool {
        match self {
            Self::Store(d) | Self::Cached(d) | Self::Fallback(d) => d.allowed(),
            Self::FailedOpen => true,
            Self::FailedClosed { .. } => false,
        }
    }
}
