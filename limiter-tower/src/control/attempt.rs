//! Checks made in a handler: a limit's check of an identity, decided as
//! its route decides a request, and counting by outcome (given back when
//! the outcome says it does not count).

use std::sync::Arc;

use axum::response::Response;
use limiter_core::{
    Attempt, ConfigError, Decision, Error, GiveBack, Identity, Policy, Receipt, Refunding, Refused,
    required,
};

use super::Control;
use crate::context::COUNTING;
use crate::limit::{Checked, LimitLayer, Refund, RouteLimit};

pub(super) async fn attempt(
    control: &Control,
    key: &str,
    policy: &Policy,
) -> Result<Attempt, Error> {
    let full = control.full_key(key);
    let policy = Arc::new(policy.clone());
    if let Some(left) = control.block_of_key(&full) {
        return Ok(Attempt::refused(Refused::Blocked(left), policy));
    }
    let store = &control.context.store;
    let (decision, receipt) = required(store.capabilities().as_key_state(), COUNTING)?
        .check_refundable(&full, &policy, policy.cost())
        .await?;
    let attempt = Attempt::new(decision, Arc::clone(&policy));
    Ok(match receipt {
        Some(receipt) => attempt.giving_back(Box::new(Refund::always_counted(
            Arc::clone(store),
            full,
            policy,
            receipt,
        ))),
        None => attempt,
    })
}

pub(super) async fn attempt_on(
    control: &Control,
    limit: &LimitLayer,
    identity: &Identity,
) -> Result<Attempt, Error> {
    let checked = check_limit(control, &limit.limit, identity, true).await?;
    let attempt = match (checked.deny_listed, checked.blocked) {
        (true, _) => Attempt::refused(Refused::DenyListed, checked.policy),
        (false, Some(left)) => Attempt::refused(Refused::Blocked(left), checked.policy),
        (false, None) => Attempt::new(checked.decision, checked.policy),
    };
    Ok(match checked.refund {
        Some(refund) => attempt.giving_back(refund),
        None => attempt,
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

/// The layers' own 429 for a denied [`Attempt`].
pub trait AttemptResponse {
    /// The layers' own answer to a denied attempt: the deny lists' 403
    /// when a list refused the identity, the blocked 429 (a problem of
    /// type [`BLOCKED`](crate::BLOCKED)) when the identity is blocked, else
    /// [`too_many_requests`](crate::too_many_requests) naming the policy in
    /// force (a live override's rules while one holds). A limit above the
    /// handler that counts by outcome never counts it as the handler's
    /// failure.
    fn too_many_requests(&self) -> Response;
}

impl AttemptResponse for Attempt {
    fn too_many_requests(&self) -> Response {
        let http = crate::response::Protocol::Http;
        match self.refusal() {
            Some(Refused::DenyListed) => crate::response::deny_listed(http),
            Some(Refused::Blocked(left)) => crate::response::blocked(http, left),
            _ => crate::too_many_requests(self.decision(), self.policy()),
        }
    }
}

impl GiveBack for Refund {
    fn receipt(&self) -> &Receipt {
        &self.receipt
    }

    fn give_back(self: Box<Self>) -> Refunding {
        Box::pin(async move { self.refund_now().await })
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
