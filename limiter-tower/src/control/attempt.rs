//! Checks made in a handler: a limit's check of an identity, decided as
//! its route decides a request, and counting by outcome (given back when
//! the outcome says it does not count).

use axum::response::Response;
use limiter_core::decide::{Check, Checked, Listed};
use limiter_core::{Attempt, ConfigError, Decision, Error, Identity, Refused};

use super::Control;
use crate::limit::{LimitLayer, RouteLimit};

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
            limit: limit.name().to_string(),
        }));
    };
    let context = limit.context.as_ref().unwrap_or(&control.context);
    let listed = if limit.lists_identity(context, identity, |common| &common.deny) {
        Some(Listed::Denied)
    } else if limit.lists_identity(context, identity, |common| &common.allow) {
        Some(Listed::Allowed)
    } else {
        None
    };
    let route = limit.options.as_deref();
    let check = Check {
        key,
        identity,
        block_key: control.identity_key(identity),
        listed,
        shadow: limit.shadow_set(context),
        penalty: route.and_then(|r| r.penalty.clone()),
        refundable,
    };
    limit.named.check(&context.shared, check).await
}
