//! How a request's answer becomes the inner call or the limiter's own
//! response, wherever it comes from (a store that decides at once, or the
//! limit's future): the one place that counts a decision, builds the 429,
//! and inserts the [`Decision`] extension.

use std::time::Duration;

use axum::response::Response;
use http::{HeaderMap, Request};
use limiter_core::{Acquired, Decision, Error, Permit, Policy, Verdict};
use tower_service::Service;

use super::ResponseFuture;
use super::admission::Admission;
use super::counters::Counted;
use super::route::RouteLimit;
use crate::context::HeaderOptions;
use crate::response::{self, Protocol, RateLimitHeaders, RouteFields};

/// How a request's answer is read.
pub(crate) struct Reading {
    pub(crate) headers: HeaderOptions,
    /// Shadow mode: denials are counted and logged, never enforced.
    pub(crate) shadow: bool,
    /// The request's plan, whose fields and names replace the limit's.
    pub(crate) plan: Option<Box<PlanFields>>,
}

/// The policy, fields and item names of a request's plan, and the
/// request's cost.
pub(crate) struct PlanFields {
    pub(crate) policy: std::sync::Arc<Policy>,
    pub(crate) fields: RouteFields,
    pub(crate) names: Box<[String]>,
    pub(crate) cost: u64,
}

/// What a request holds before its rate is read: its concurrency permit
/// and that permit's fields.
#[derive(Default)]
struct Held {
    permit: Option<Permit>,
    fields: Option<RateLimitHeaders>,
}

/// What a concurrency permit's answer leads to.
enum Permitted {
    Held(Held),
    Denied(Response),
    Failed(Error),
}

impl RouteLimit {
    /// What follows a request's answer: the inner call (`inner` is ready),
    /// holding the permit, with the fields; or the limiter's own response.
    #[inline]
    pub(crate) fn answer<S, B>(
        &self,
        admission: Admission,
        reading: Reading,
        inner: &mut S,
        request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let held = match admission.permit {
            None => Held::default(),
            Some(acquired) => match self.on_permit(acquired, &reading, request.headers()) {
                Permitted::Held(held) => held,
                Permitted::Denied(response) => return ResponseFuture::respond(response),
                Permitted::Failed(error) => return self.failed(error, &reading, inner, request),
            },
        };
        let verdict = match admission.verdict {
            None => return held.proceed(inner, request, None, Duration::ZERO),
            Some(Err(error)) => return self.failed(error, &reading, inner, request),
            Some(Ok(verdict)) => verdict,
        };
        self.record(Counted::of(&verdict));
        match verdict {
            Verdict::FailedClosed { retry_after } if !reading.shadow => {
                let protocol = Protocol::of(request.headers());
                ResponseFuture::respond(response::unavailable(protocol, retry_after))
            }
            verdict => match verdict.decision() {
                Some(decision) => self.on_decision(decision, &reading, held, inner, request),
                // Failed open (or closed, in shadow mode): no decision, no fields.
                None => held.proceed(inner, request, None, Duration::ZERO),
            },
        }
    }

    /// Proceeds with the decision's fields (and, when the limit has it on,
    /// the decision as a request extension), or answers 429.
    #[inline]
    fn on_decision<S, B>(
        &self,
        decision: &Decision,
        reading: &Reading,
        held: Held,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let options = reading.headers;
        let fields = reading
            .plan
            .as_ref()
            .map_or(&self.fields, |plan| &plan.fields);
        let mut delay = decision.delay();
        if !decision.allowed() {
            if !reading.shadow {
                return ResponseFuture::respond(
                    self.too_many_requests(decision, reading, &request),
                );
            }
            delay = Duration::ZERO;
            self.shadow_counter
                .record(self.policy.algorithm().name(), &self.name);
            tracing::info!(
                limit = %self.name,
                rule = %decision.rule(),
                "shadow mode: would have been rate limited"
            );
        }
        let headers =
            (options.on_allowed || !decision.allowed()).then(|| fields.of(decision, options));
        if self.decision_extension {
            request.extensions_mut().insert(*decision);
        }
        held.proceed(inner, request, headers, delay)
    }

    /// The 429 of a denied decision, named after the request's plan or the
    /// limit's policy.
    #[cold]
    #[inline(never)]
    fn too_many_requests<B>(
        &self,
        decision: &Decision,
        reading: &Reading,
        request: &Request<B>,
    ) -> Response {
        tracing::debug!(
            limit = %self.name,
            rule = %decision.rule(),
            retry_after = ?decision.retry_after(),
            "rate limited"
        );
        let own_names;
        let (fields, names, cost) = match &reading.plan {
            Some(plan) => (&plan.fields, &plan.names[..], plan.cost),
            None => {
                own_names = self.policy.names();
                (&self.fields, &own_names[..], self.policy.cost())
            }
        };
        response::too_many_requests(
            Protocol::of(request.headers()),
            decision,
            names,
            cost,
            fields.of(decision, reading.headers),
            self.message.as_deref(),
        )
    }

    /// Reads a concurrency permit's answer, counted in the concurrency
    /// limit's own counters.
    #[cold]
    #[inline(never)]
    fn on_permit(
        &self,
        acquired: Result<Acquired, Error>,
        reading: &Reading,
        request: &HeaderMap,
    ) -> Permitted {
        let concurrency = self
            .business
            .as_deref()
            .and_then(|b| b.concurrency.as_ref())
            .expect("a permit is asked for a concurrency limit");
        let record = |counted| {
            concurrency
                .counters
                .record(counted, || "concurrency", &self.name)
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
                return Permitted::Denied(response::too_many_requests(
                    Protocol::of(request),
                    &decision,
                    &concurrency.names,
                    1,
                    concurrency.fields.of(&decision, options),
                    self.message.as_deref(),
                ));
            }
            concurrency.shadow_counter.record("concurrency", &self.name);
            tracing::info!(limit = %self.name, "shadow mode: too many requests in flight");
        }
        Permitted::Held(Held {
            permit: acquired.permit(),
            fields: (options.on_allowed || !decision.allowed())
                .then(|| concurrency.fields.of(&decision, options)),
        })
    }

    /// A store error: 503, or in shadow mode the inner call.
    #[cold]
    #[inline(never)]
    fn failed<S, B>(
        &self,
        error: Error,
        reading: &Reading,
        inner: &mut S,
        request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        self.record(Counted::Error);
        if reading.shadow {
            tracing::error!(limit = %self.name, %error, "the rate limiter failed (shadow mode)");
            return ResponseFuture::proceed(inner, request, None, Duration::ZERO);
        }
        tracing::error!(limit = %self.name, %error, "the rate limiter failed");
        let protocol = Protocol::of(request.headers());
        ResponseFuture::respond(response::unavailable(protocol, Duration::from_secs(1)))
    }
}

impl Held {
    /// Calls `inner`, now or after `delay`, with the rate limit's fields
    /// joined to the permit's, the response body holding the permit.
    #[inline]
    fn proceed<S, B>(
        self,
        inner: &mut S,
        request: Request<B>,
        rate: Option<RateLimitHeaders>,
        delay: Duration,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let fields = match (rate, self.fields) {
            (Some(rate), Some(concurrency)) => Some(RateLimitHeaders::join(rate, concurrency)),
            (rate, concurrency) => rate.or(concurrency),
        };
        ResponseFuture::proceed_holding(inner, request, fields, delay, self.permit)
    }
}
