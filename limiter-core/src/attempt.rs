//! A request checked so that it can be given back: one type whatever
//! made the check ([`Limiter::attempt`](crate::Limiter::attempt), or an
//! HTTP limit's check in a handler), so code that counts by outcome reads
//! and refunds every attempt alike.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::{Decision, Error, Policy, Receipt};

/// A refund under way.
pub type Refunding = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// What gives a recorded attempt back: the store's refund of the attempt's
/// key, or an HTTP limit's, as its route would give a request back.
pub trait GiveBack: Send + Sync + 'static {
    /// What the store recorded.
    fn receipt(&self) -> &Receipt;

    /// Gives the attempt back.
    fn give_back(self: Box<Self>) -> Refunding;
}

/// Why an attempt was refused without a check of its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// The identity is blocked for this long still.
    Blocked(Duration),
    /// A deny list names the identity.
    DenyListed,
}

/// A request checked by [`Limiter::attempt`](crate::Limiter::attempt), or
/// by an HTTP limit's check in a handler: it counts unless it is
/// [refunded](Self::refund); dropped without a refund, it stays counted.
#[must_use = "an attempt counts unless it is refunded"]
pub struct Attempt {
    decision: Decision,
    policy: Arc<Policy>,
    refused: Option<Refused>,
    give_back: Option<Box<dyn GiveBack>>,
}

impl Attempt {
    /// An attempt decided under `policy` (the policy in force: a live
    /// override's, a plan's or the limit's own), with nothing to give back.
    pub fn new(decision: Decision, policy: Arc<Policy>) -> Self {
        Self {
            decision,
            policy,
            refused: None,
            give_back: None,
        }
    }

    /// An attempt refused without a check.
    pub fn refused(refused: Refused, policy: Arc<Policy>) -> Self {
        let left = match refused {
            Refused::Blocked(left) => left,
            Refused::DenyListed => Duration::MAX,
        };
        Self {
            refused: Some(refused),
            ..Self::new(Decision::blocked(&policy, left), policy)
        }
    }

    /// This attempt, given back by `give_back` when it is refunded.
    pub fn giving_back(mut self, give_back: Box<dyn GiveBack>) -> Self {
        self.give_back = Some(give_back);
        self
    }

    /// The check's decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The policy the attempt was checked under: a live override's while
    /// one holds.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Why the attempt was refused without a check, if it was.
    pub fn refusal(&self) -> Option<Refused> {
        self.refused
    }

    /// The block's time left when the identity is blocked: the attempt was
    /// denied without a check.
    pub fn blocked(&self) -> Option<Duration> {
        match self.refused {
            Some(Refused::Blocked(left)) => Some(left),
            _ => None,
        }
    }

    /// What the store recorded (`None`: the request was denied, or decided
    /// without the store, and nothing can be given back).
    pub fn receipt(&self) -> Option<&Receipt> {
        self.give_back.as_deref().map(GiveBack::receipt)
    }

    /// Gives the request back: it no longer counts. Does nothing for a
    /// request that was not recorded (denied, or decided without the store).
    pub async fn refund(self) -> Result<(), Error> {
        match self.give_back {
            Some(give_back) => give_back.give_back().await,
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("decision", &self.decision)
            .field("refused", &self.refused)
            .field("refundable", &self.give_back.is_some())
            .finish_non_exhaustive()
    }
}
