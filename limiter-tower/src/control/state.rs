//! What the limits are, and what an identity's would answer, rule by rule.

use limiter_core::decide::InForce;
use limiter_core::{Decision, Policy};
use serde::Serialize;

use super::{Control, Named};
use crate::key::Source;

/// What one rule of one limit would answer an identity's next request,
/// read without counting it, under the policy that request would meet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitState {
    /// The route, as given to [`Control::limit`](super::Control::limit)
    /// (`POST /posts/{id}/replies`).
    pub route: String,
    /// The limit's name, as overrides and top offenders take it
    /// (`posts-create_reply`).
    pub name: String,
    /// The identity kind the limit counts by, as the admin routes name it
    /// (`ip`, `user`, `key`, `header`, `custom`).
    pub kind: &'static str,
    /// The rule's name, as `RateLimit-Policy` names it: a live override's
    /// rule while one holds.
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
    /// The live override in force, when one holds.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub overridden: Option<OverrideInForce>,
}

/// A live override in force on a limit, as [`LimitState`] and
/// [`LimitInfo`] show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverrideInForce {
    /// `enforce`, `shadow` or `off`.
    pub mode: &'static str,
    /// Seconds until the compiled limit is back, rounded up.
    pub seconds: u64,
}

/// The former name of [`OverrideInForce`].
#[deprecated(since = "0.1.0", note = "renamed `OverrideInForce`")]
pub type OverrideHeld = OverrideInForce;

/// One limit a [`Control`] answers for, as [`Control::limit_list`] lists
/// it and the admin router answers it (`GET /limits`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitInfo {
    /// The limit's name, as overrides and top offenders take it.
    pub name: String,
    /// The route, as given to [`Control::limit`].
    pub route: String,
    /// The identity kind it counts by, as the admin routes name it (`ip`,
    /// `user`, `key`, `header`, `custom`), or `global`.
    pub kind: &'static str,
    /// For a limit by another header than the API key's, its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The algorithm of the rules in force.
    pub algorithm: &'static str,
    /// The `RateLimit` names of the rules in force (`5-per-60s`): a live
    /// override's while one holds with rules of its own.
    pub rules: Vec<String>,
    /// The compiled rules' names, whatever holds.
    pub compiled: Vec<String>,
    /// The live override in force, when one holds.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub overridden: Option<OverrideInForce>,
}

/// The live override `in_force` shows, when one holds.
fn held(in_force: &InForce) -> Option<OverrideInForce> {
    let (value, left) = in_force.overridden.as_ref()?;
    Some(OverrideInForce {
        mode: value.mode().name(),
        seconds: u64::try_from(left.as_micros().div_ceil(1_000_000)).unwrap_or(u64::MAX),
    })
}

/// One state per rule of `decision`, of the limit `named` under `policy`.
pub(super) fn states_of(
    named: &Named,
    kind: (&'static str, Option<String>),
    in_force: &InForce,
    policy: &Policy,
    decision: &Decision,
) -> Vec<LimitState> {
    let seconds = |d: std::time::Duration| d.as_micros().div_ceil(1_000_000) as u64;
    let cost = policy.cost();
    policy
        .names()
        .into_iter()
        .zip(policy.rules())
        .zip(decision.rules())
        .map(|((name, rule), status)| LimitState {
            route: named.route.to_string(),
            name: named.limit.name().to_string(),
            kind: kind.0,
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
            overridden: held(in_force),
        })
        .collect()
}

pub(super) fn limit_list(control: &Control) -> Vec<LimitInfo> {
    let mut listed: Vec<LimitInfo> = Vec::new();
    for part in control.parts() {
        for named in part.limits.iter() {
            if listed.iter().any(|l| *l.name == *named.limit.name()) {
                continue;
            }
            let limit = &named.limit;
            let context = limit.context.as_ref().unwrap_or(&part.context);
            let in_force = limit.in_force(context);
            let policy = in_force.override_rules().unwrap_or(limit.policy());
            let (kind, header) = match &limit.source.0 {
                Source::Global => ("global", None),
                source => part.kind_of(source),
            };
            listed.push(LimitInfo {
                name: limit.name().to_string(),
                route: named.route.to_string(),
                kind,
                header,
                algorithm: policy.algorithm().name(),
                rules: policy.names(),
                compiled: limit.policy().names(),
                overridden: held(&in_force),
            });
        }
    }
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    listed
}
