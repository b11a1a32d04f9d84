//! What an identity's limits would answer, rule by rule.

use limiter_core::{Decision, Policy};
use serde::Serialize;

/// What one rule of one limit would answer an identity's next request,
/// read without counting it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitState {
    /// The route, as given to [`Control::limit`](super::Control::limit)
    /// (`POST /posts/{id}/replies`).
    pub route: String,
    /// The rule's name, as `RateLimit-Policy` names it.
    pub policy: String,
    /// The rule's limit.
    pub limit: u64,
    /// Whether the next request would pass.
    pub allowed: bool,
    /// The quota left: how many requests pass now, before the next one.
    pub remaining: u64,
    /// Seconds (rounded up) until the rule makes more quota available, as
    /// the `RateLimit` field's `t` tells the next request.
    pub reset: u64,
    /// When the next request would be denied, the seconds (rounded up)
    /// until it would pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

/// One state per rule of `decision`.
pub(super) fn states_of(route: &str, policy: &Policy, decision: &Decision) -> Vec<LimitState> {
    let seconds = |d: std::time::Duration| d.as_micros().div_ceil(1_000_000) as u64;
    let cost = policy.cost();
    policy
        .names()
        .into_iter()
        .zip(policy.rules())
        .zip(decision.rules())
        .map(|((name, rule), status)| LimitState {
            route: route.to_owned(),
            policy: name,
            limit: rule.limit(),
            allowed: decision.allowed(),
            // An allowed peek answers what would remain after the request.
            remaining: if decision.allowed() {
                (status.remaining() + cost).min(rule.limit())
            } else {
                status.remaining()
            },
            reset: seconds(status.available_after()),
            retry_after: decision.retry_after().map(seconds),
        })
        .collect()
}
