//! Checks made in a handler: a limit's check of an identity, decided as
//! its route decides a request, and counting by outcome (given back when
//! the outcome says it does not count).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use limiter_core::{ConfigError, Decision, Error, Identity, Policy, Receipt, required};

use super::Control;
use crate::context::{COUNTING, DynStore};
use crate::limit::{Checked, LimitLayer, Refund, RouteLimit};

/// A request checked by [`Control::attempt`] or [`Control::attempt_on`]:
/// it counts unless it is [refunded](Self::refund); dropped without a
/// refund, it stays counted.
#[must_use = "an attempt counts unless it is refunded"]
pub struct Attempt {
    decision: Decision,
    policy: Arc<Policy>,
    blocked: Option<Duration>,
    deny_listed: bool,
    give_back: Option<GiveBack>,
}

/// What gives an attempt back.
enum GiveBack {
    /// A limit's check, as its route would give it back.
    Limit(Box<Refund>),
    /// A check on a key of the caller's.
    Key {
        store: Arc<dyn DynStore>,
        key: String,
        receipt: Receipt,
    },
}

pub(super) async fn attempt(
    control: &Control,
    key: &str,
    policy: &Policy,
) -> Result<Attempt, Error> {
    let mut full = String::from(&*control.context.key_start);
    full.push_str(key);
    let policy = Arc::new(policy.clone());
    if let Some(left) = control.block_of_key(&full) {
        return Ok(Attempt {
            decision: Decision::blocked(&policy, left),
            policy,
            blocked: Some(left),
            deny_listed: false,
            give_back: None,
        });
    }
    let refunds = required(
        control.context.store.capabilities().as_key_state(),
        COUNTING,
    )?;
    let (decision, receipt) = refunds
        .check_refundable(&full, &policy, policy.cost())
        .await?;
    Ok(Attempt {
        decision,
        policy,
        blocked: None,
        deny_listed: false,
        give_back: receipt.map(|receipt| GiveBack::Key {
            store: Arc::clone(&control.context.store),
            key: full,
            receipt,
        }),
    })
}

pub(super) async fn attempt_on(
    control: &Control,
    limit: &LimitLayer,
    identity: &Identity,
) -> Result<Attempt, Error> {
    let checked = check_limit(control, &limit.limit, identity, true).await?;
    Ok(Attempt {
        decision: checked.decision,
        policy: checked.policy,
        blocked: checked.blocked,
        deny_listed: checked.deny_listed,
        give_back: checked.refund.map(GiveBack::Limit),
    })
}

pub(super) async fn check_on(
    control: &Control,
    limit: &LimitLayer,
    identity: &Identity,
) -> Result<Decision, Error> {
    let checked = check_limit(control, &limit.limit, identity, false).await?;
    Ok(checked.decision)
}

impl Attempt {
    /// The check's decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The block's time left when the identity is blocked: the attempt was
    /// denied without a check.
    pub fn blocked(&self) -> Option<Duration> {
        self.blocked
    }

    /// The layers' own 429 for a denied attempt: the blocked answer (a
    /// problem of type [`BLOCKED`](crate::BLOCKED)) when the identity is
    /// blocked, else [`too_many_requests`](crate::too_many_requests) naming
    /// the policy in force (a live override's rules while one holds). A
    /// limit above the handler that counts by outcome never counts it as
    /// the handler's failure.
    pub fn too_many_requests(&self) -> Response {
        let http = crate::response::Protocol::Http;
        match self.blocked {
            _ if self.deny_listed => crate::response::deny_listed(http),
            Some(left) => crate::response::blocked(http, left),
            None => crate::too_many_requests(&self.decision, &self.policy),
        }
    }

    /// Gives the request back: it no longer counts. Does nothing for a
    /// request that was not recorded (denied, or decided without the store).
    pub async fn refund(self) -> Result<(), Error> {
        match &self.give_back {
            Some(GiveBack::Limit(refund)) => refund.give_back().await,
            Some(GiveBack::Key {
                store,
                key,
                receipt,
            }) => {
                required(store.capabilities().as_key_state(), COUNTING)?
                    .refund(key, &self.policy, receipt)
                    .await
            }
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("decision", &self.decision)
            .field("blocked", &self.blocked)
            .field("refundable", &self.give_back.is_some())
            .finish_non_exhaustive()
    }
}

/// `limit`'s check of `identity`, under the limit's own settings or
/// this handle's router layer's, as its route decides a request.
async fn check_limit(
    control: &Control,
    limit: &RouteLimit,
    identity: &Identity,
    refundable: bool,
) -> Result<Checked, Error> {
    let Some(key) = control.key_of(limit, identity) else {
        return Err(Error::Config(ConfigError::NoIdentity {
            limit: limit.name.to_string(),
        }));
    };
    let context = limit.context.as_ref().unwrap_or(&control.context);
    let block_key = control.identity_key(identity);
    limit
        .check_identity(context, key, identity, block_key, refundable)
        .await
}
