//! How a request's answer becomes the inner call or the limiter's own
//! response, wherever it comes from (a store that decides at once, or the
//! limit's future): the one place that counts a decision, builds the 429,
//! and inserts the [`Decision`] extension; and the answers given without
//! the store (no identity, a block, a deny list, a misconfiguration).

use std::time::Duration;

use axum::response::Response;
use http::{HeaderMap, Request};
use limiter_core::{Acquired, Decision, Error, Permit, Verdict};

use limiter_core::decide::{Admission, Counted, Refund};

use super::admission::{Reading, Settle};
use super::future::Next;
use super::route::NoKey;
use super::route::RouteLimit;
use crate::context::Context;
use crate::misconfigured::Missing;
use crate::response::{self, Protocol, RateLimitHeaders};

/// A concurrency permit held, and its fields.
#[derive(Default)]
struct Granted {
    permit: Option<Permit>,
    fields: Option<RateLimitHeaders>,
}

/// What a concurrency permit's answer leads to.
enum Permitted {
    Granted(Granted),
    Denied(Response),
    Failed(Error),
}

/// What follows the store's answer to a request it did not decide at
/// once: the inner call, holding the permit, with the fields; or the
/// limiter's own response.
pub(crate) fn answer<B>(
    limit: &RouteLimit,
    admission: Admission,
    reading: Reading,
    context: &Context,
    request: &mut Request<B>,
) -> Next {
    let mut held = Granted::default();
    if let Some(acquired) = admission.permit {
        match on_permit(limit, acquired, context, &reading, request) {
            Permitted::Granted(permit) => held = permit,
            Permitted::Denied(response) => return Next::Respond(response),
            // The rate check's receipt stays: the response still says
            // whether the request counts (shadow mode, or a failure
            // policy that lets it through).
            Permitted::Failed(error) => {
                let next = failed(limit, &error, &reading, request.headers());
                return next.holding(None, settle(limit, admission.refund));
            }
        }
    }
    let next = match admission.verdict {
        Some(verdict) => on_verdict(limit, verdict, context, &reading, request),
        None => Next::UNCHECKED,
    };
    let next = match next {
        Next::Proceed { fields, delay, .. } => Next::Proceed {
            fields: match (fields, held.fields) {
                (Some(rate), Some(concurrency)) => Some(rate.join(concurrency)),
                (rate, concurrency) => rate.or(concurrency),
            },
            delay,
            after: None,
        },
        respond => respond,
    };
    next.holding(held.permit, settle(limit, admission.refund))
}

/// What settles a request the store recorded so that it can be given
/// back: the limit's rule for which responses count.
fn settle(limit: &RouteLimit, refund: Option<Box<Refund>>) -> Option<Settle> {
    let counts = limit.options.as_deref()?.count_when.clone()?;
    Some(Settle {
        refund: refund?,
        counts,
    })
}

/// What follows the rate check's answer.
fn on_verdict<B>(
    limit: &RouteLimit,
    verdict: Result<Verdict, Error>,
    context: &Context,
    reading: &Reading,
    request: &mut Request<B>,
) -> Next {
    let verdict = match verdict {
        Ok(verdict) => verdict,
        Err(error) => return failed(limit, &error, reading, request.headers()),
    };
    let counted = Counted::of(&verdict);
    if let Some(decision) = verdict.decision() {
        return on_decision(limit, decision, counted, context, reading, request);
    }
    limit.record_as(counted, reading.overridden);
    match verdict {
        Verdict::FailedClosed { retry_after } if !reading.shadow => {
            let protocol = Protocol::of(request.headers());
            Next::Respond(response::unavailable(protocol, retry_after))
        }
        // Failed open (or closed, in shadow mode): no decision, no fields.
        _ => Next::UNCHECKED,
    }
}

/// Counts a decision, and proceeds with its fields (and, when the limit
/// has it on, the decision as a request extension), or answers 429
/// (counting the denial of the request's identity).
#[inline(always)]
pub(crate) fn on_decision<B>(
    limit: &RouteLimit,
    decision: &Decision,
    counted: Counted,
    context: &Context,
    reading: &Reading,
    request: &mut Request<B>,
) -> Next {
    limit.record_as(counted, reading.overridden);
    let options = reading.headers;
    let mut delay = decision.delay();
    if !decision.allowed() {
        if !reading.shadow {
            limit.record_denial(context, request);
            return Next::Respond(too_many_requests(limit, decision, reading, request));
        }
        delay = Duration::ZERO;
        limit.named.record_shadowed();
        tracing::info!(
            limit = %limit.name(),
            rule = %decision.rule(),
            "shadow mode: would have been rate limited"
        );
    }
    let fields = (options.on_allowed || !decision.allowed()).then(|| {
        let fields = reading
            .plan
            .as_ref()
            .map_or(&limit.fields, |plan| &plan.fields);
        fields.of(decision, options)
    });
    if limit.decision_extension {
        request.extensions_mut().insert(*decision);
    }
    Next::Proceed {
        fields,
        delay,
        after: None,
    }
}

/// The 429 of a denied decision, named after the request's plan or the
/// limit's policy.
#[cold]
#[inline(never)]
fn too_many_requests<B>(
    limit: &RouteLimit,
    decision: &Decision,
    reading: &Reading,
    request: &Request<B>,
) -> Response {
    tracing::debug!(
        limit = %limit.name(),
        rule = %decision.rule(),
        retry_after = ?decision.retry_after(),
        "rate limited"
    );
    let own_names;
    let (fields, names, policy) = match &reading.plan {
        Some(plan) => (&plan.fields, &plan.names[..], &plan.policy),
        None => {
            own_names = limit.policy().names();
            (&limit.fields, &own_names[..], limit.policy())
        }
    };
    let cost = reading.cost.unwrap_or_else(|| policy.cost());
    response::too_many_requests_of(
        Protocol::of(request.headers()),
        decision,
        names,
        cost,
        fields.of(decision, reading.headers),
        limit.message.as_deref(),
    )
}

/// Reads a concurrency permit's answer, counted in the concurrency
/// limit's own counters.
#[cold]
#[inline(never)]
fn on_permit<B>(
    limit: &RouteLimit,
    acquired: Result<Acquired, Error>,
    context: &Context,
    reading: &Reading,
    request: &mut Request<B>,
) -> Permitted {
    let concurrency = limit
        .options
        .as_deref()
        .and_then(|b| b.concurrency.as_ref())
        .expect("a permit is asked for a concurrency limit");
    let record = |counted| {
        concurrency
            .counters
            .record(counted, || "concurrency", limit.name(), false)
    };
    let acquired = match acquired {
        Ok(acquired) => acquired,
        Err(error) => {
            record(Counted::Error);
            return Permitted::Failed(error);
        }
    };
    let decision = *acquired.decision();
    let options = reading.headers;
    if acquired.allowed() {
        record(Counted::StoreAllowed);
    } else {
        record(Counted::StoreDenied);
        if !reading.shadow {
            limit.record_denial(context, request);
            return Permitted::Denied(response::too_many_requests_of(
                Protocol::of(request.headers()),
                &decision,
                &concurrency.names,
                1,
                concurrency.fields.of(&decision, options),
                limit.message.as_deref(),
            ));
        }
        concurrency
            .shadow_counter
            .record("concurrency", limit.name());
        tracing::info!(limit = %limit.name(), "shadow mode: too many requests in flight");
    }
    Permitted::Granted(Granted {
        permit: acquired.permit(),
        fields: (options.on_allowed || !decision.allowed())
            .then(|| concurrency.fields.of(&decision, options)),
    })
}

/// A store error: 503, or in shadow mode the inner call.
#[cold]
#[inline(never)]
pub(crate) fn failed(
    limit: &RouteLimit,
    error: &Error,
    reading: &Reading,
    request: &HeaderMap,
) -> Next {
    limit.record_as(Counted::Error, reading.overridden);
    if reading.shadow {
        tracing::error!(limit = %limit.name(), %error, "the rate limiter failed (shadow mode)");
        return Next::UNCHECKED;
    }
    tracing::error!(limit = %limit.name(), %error, "the rate limiter failed");
    let protocol = Protocol::of(request);
    Next::Respond(response::unavailable(protocol, Duration::from_secs(1)))
}

// The answers given without the store.
/// The answer to a request no key could be built for.
pub(crate) fn refuse<B>(
    limit: &RouteLimit,
    no_key: NoKey,
    context: &Context,
    request: &Request<B>,
) -> Next {
    match no_key {
        NoKey::NotInRequest => Next::Respond(response::problem(
            Protocol::of(request.headers()),
            context.missing_identity,
            &format!(
                "This route is rate limited per {}, and the request carries none.",
                limit.identity_name()
            ),
        )),
        NoKey::NotSetUp(missing) => misconfigured(limit, missing, request),
    }
}

/// The answer to a request whose identity is blocked.
#[cold]
#[inline(never)]
pub(crate) fn blocked<B>(
    limit: &RouteLimit,
    left: Duration,
    context: &Context,
    request: &mut Request<B>,
) -> Next {
    limit.record(Counted::Blocked);
    limit.record_denial(context, request);
    tracing::debug!(limit = %limit.name(), ?left, "blocked");
    Next::Respond(response::blocked(Protocol::of(request.headers()), left))
}

/// The answer to a request on a deny list.
#[cold]
#[inline(never)]
pub(crate) fn deny_listed<B>(limit: &RouteLimit, request: &Request<B>) -> Next {
    limit.record(Counted::DenyListed);
    Next::Respond(response::deny_listed(Protocol::of(request.headers())))
}

pub(crate) fn misconfigured<B>(limit: &RouteLimit, missing: Missing, request: &Request<B>) -> Next {
    Next::Respond(missing.response(limit.name(), Protocol::of(request.headers())))
}
