//! How a request on a limit's route is decided: the pipeline's steps
//! ([`limiter_core::decide`], which a check made in a handler takes too)
//! with what HTTP adds around them, in this order:
//!
//! 1. the deny lists, then the allow lists (the limit's and the router
//!    layer's), matched against the request's client address and identity;
//! 2. the key: the limit's name and the identity's kind and value, read
//!    from the request;
//! 3. the identity's block (or its client address's);
//! 4. the policy in force: a live override (its rules, shadow mode, or
//!    off), else the plan a resolver finds for the request, else the
//!    limit's own; and the request's cost;
//! 5. the store, under the failure policy: at once when it decides at
//!    once, else in the limit's future ([`admit`]), with the permit,
//!    waiting, the penalty and the refund receipt;
//! 6. the answer ([`answer`](super::answer)): the decision counted, a
//!    denial counted among the top offenders, shadow mode, the fields and
//!    the 429.

use std::cell::Cell;
use std::sync::Arc;

use axum::response::Response;
use http::{Request, StatusCode};
use limiter_core::decide::{Admission, Checks, Counted, InForce, Rules, admit};
use limiter_core::{ConcurrencyLimit, Key, MaxWait, Penalty};
use tower_service::Service;

use super::ResponseFuture;
use super::admission::{PlanFields, Reading};
use super::answer;
use super::future::Next;
use super::route::{RouteLimit, with_parts};
use crate::context::Context;
use crate::misconfigured::Missing;
use crate::options::{CountWhen, RouteOptions};
use crate::response::{self, Protocol};
use crate::scope::Current;

thread_local! {
    /// The key buffer of this thread's checks, reused so that a check on a
    /// store that decides at once allocates no key.
    static KEY_BUFFER: Cell<Key> = const { Cell::new(Key::new()) };
}

impl RouteLimit {
    /// Admits a request under the router layer's context (the limit's own,
    /// or the one in scope), and
    /// answers with the future of what follows: `inner` called (it is
    /// ready), the limiter's own response, or the wait for a store that
    /// does not decide at once.
    pub(crate) fn call<S, B>(
        self: &Arc<Self>,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        // The scope is whole again before `inner` is called: a limit below
        // this one takes the context in its turn.
        let next = self.next(&mut request);
        // The allowed request's path on its own, so that the request moves
        // once, into `inner`'s call, and its future straight into ours.
        match next {
            Next::Proceed {
                fields,
                delay,
                after,
            } if delay.is_zero() => ResponseFuture::calling(inner.call(request), fields, after),
            next => ResponseFuture::new(inner, request, next),
        }
    }

    /// What follows a request's admission: under the limit's own context,
    /// or the one taken from the scope meanwhile.
    #[inline(always)]
    fn next<B>(self: &Arc<Self>, request: &mut Request<B>) -> Next {
        let current;
        let context = match &self.context {
            Some(own) => own,
            None => {
                current = Current::take();
                let Some(context) = current.context() else {
                    return answer::misconfigured(self, Missing::RouterLayer, request);
                };
                context
            }
        };
        let optioned = self.options.is_some() || context.options.is_some();
        if optioned && self.is_denied(context, request) {
            return answer::deny_listed(self, request);
        }
        // An allowed client needs no identity for this limit.
        if optioned && self.bypasses(context, request) {
            self.record(Counted::Bypassed);
            return Next::UNCHECKED;
        }
        let mut key = KEY_BUFFER.take();
        if let Err(no_key) = self.write_key(&mut key, context, request) {
            KEY_BUFFER.set(key);
            return answer::refuse(self, no_key, context, request);
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(limit = %self.name(), %key, "checking");
        }
        if self.named.honours_blocks
            && let Some(left) = self.block_of(&key, context, request)
        {
            let next = answer::blocked(self, left, context, request);
            KEY_BUFFER.set(key);
            return next;
        }
        // The override itself is looked up on the cold path: the plain
        // path holds nothing to drop.
        if optioned || self.named.may_be_overridden(&context.shared) {
            let checks = match self.option_checks(context, request) {
                Ok(Some(checks)) => checks,
                not_checked => {
                    KEY_BUFFER.set(key);
                    return match not_checked {
                        Err(refused) => Next::Respond(refused),
                        Ok(_) => Next::UNCHECKED,
                    };
                }
            };
            // A permit to take, or waiting: awaited.
            let Some(cost) = checks.at_once() else {
                return self.pending(context, key, checks);
            };
            self.at_once(context, key, cost, checks.reading, request)
        } else {
            // Apart, so that its reading is known to hold no plan to drop.
            let reading = Reading::plain(context.headers);
            self.at_once(context, key, self.policy().cost(), reading, request)
        }
    }

    /// The store's decision when it decides at once (the decision step of
    /// `answer`, without wrapping the decision, read where the store wrote
    /// it); else the wait for it.
    #[inline(always)]
    fn at_once<B>(
        self: &Arc<Self>,
        context: &Arc<Context>,
        key: Key,
        cost: u64,
        reading: Reading,
        request: &mut Request<B>,
    ) -> Next {
        let next = match &context
            .shared
            .store
            .check_now(&key, reading.policy(self), cost)
        {
            Some(Ok(decision)) => {
                let counted = Counted::by_store(decision);
                answer::on_decision(self, decision, counted, context, &reading, request)
            }
            Some(Err(error)) => answer::failed(self, error, &reading, request.headers()),
            None => {
                let checks = RequestChecks::rate(cost, reading);
                return self.pending(context, key, checks);
            }
        };
        KEY_BUFFER.set(key);
        next
    }

    /// The wait for the store's answer.
    fn pending(self: &Arc<Self>, context: &Arc<Context>, key: Key, checks: RequestChecks) -> Next {
        let policy = checks.reading.policy(self);
        let rate = checks.cost.map(|cost| (Arc::clone(policy), cost));
        let penalty = checks
            .penalty
            .map(|penalty| (penalty, context.shared.block_key(&key)));
        let pending = admit(Checks {
            store: Arc::clone(&context.shared.store),
            key,
            rate,
            concurrency: checks.concurrency,
            // `None`: the failure policy of whoever guards the store.
            on_error: (self.named.on_store_error).or(context.shared.on_store_error),
            waiters: checks
                .wait
                .map(|max| (context.shared.waiters.clone(), max.get())),
            shadow: checks.reading.shadow,
            penalty,
            counting: checks.count_when.is_some(),
        });
        Next::Check {
            pending,
            limit: Arc::clone(self),
            reading: checks.reading,
            context: Arc::clone(context),
        }
    }

    /// The request's answer once the store's has come: the inner call,
    /// holding the permit, with the fields; or the limiter's own response
    /// (see `answer.rs`).
    pub(crate) fn answer<B>(
        &self,
        admission: Admission,
        reading: Reading,
        context: &Context,
        request: &mut Request<B>,
    ) -> Next {
        answer::answer(self, admission, reading, context, request)
    }
}

/// How one request is checked.
pub(crate) struct RequestChecks {
    /// The rate check's cost; `None` when only a permit is checked.
    pub(crate) cost: Option<u64>,
    pub(crate) concurrency: Option<ConcurrencyLimit>,
    /// How long the request may wait for its retry time.
    pub(crate) wait: Option<MaxWait>,
    /// Denials earn blocks: counted after the check.
    pub(crate) penalty: Option<Arc<Penalty>>,
    /// Requests count only when their response says so.
    pub(crate) count_when: Option<CountWhen>,
    pub(crate) reading: Reading,
}

/// The rate check a request gets: its cost, and its plan when it has one.
struct RateCheck {
    cost: u64,
    plan: Option<Box<PlanFields>>,
}

impl RequestChecks {
    /// A rate check alone, of `cost`.
    pub(crate) fn rate(cost: u64, reading: Reading) -> Self {
        Self {
            cost: Some(cost),
            concurrency: None,
            wait: None,
            penalty: None,
            count_when: None,
            reading,
        }
    }

    /// The cost of a rate check that a store may decide at once: one with
    /// no permit to take, no waiting, no penalty to count and nothing to
    /// give back.
    pub(crate) fn at_once(&self) -> Option<u64> {
        match (self.concurrency, self.wait, &self.penalty, &self.count_when) {
            (None, None, None, None) => self.cost,
            _ => None,
        }
    }
}

impl RouteLimit {
    /// How a request to a limit with options (or a live
    /// override) is checked; `None` when it is not checked at all (an
    /// unlimited plan, a cost of 0, a limit switched off, and no
    /// concurrency limit). A cost no request could pay is refused.
    #[cold]
    #[inline(never)]
    #[allow(clippy::result_large_err)]
    pub(crate) fn option_checks<B>(
        &self,
        context: &Context,
        request: &mut Request<B>,
    ) -> Result<Option<RequestChecks>, Response> {
        let route = self.options.as_deref();
        let layer = context.options.as_deref();
        let in_force = self.in_force(context);
        if !in_force.checked() {
            self.record_as(Counted::OverrideOff, true);
            return Ok(None);
        }
        let shadow = in_force.shadow;
        let rate = match route {
            Some(route) if !route.rate => None,
            _ => self.rate_check(route, request, &in_force)?,
        };
        let concurrency = route.and_then(|r| r.concurrency.as_ref()).map(|c| c.limit);
        if rate.is_none() && concurrency.is_none() {
            return Ok(None);
        }
        // Shadow mode denies nothing, so it makes nobody wait either.
        let wait = route
            .and_then(|r| r.common.wait)
            .or(layer.and_then(|l| l.wait))
            .filter(|_| !shadow)
            .filter(|_| {
                route
                    .and_then(|r| r.wait_when.as_ref())
                    .is_none_or(|when| with_parts(request, |parts| when(parts)))
            });
        let (cost, plan) = match rate {
            Some(RateCheck { cost, plan }) => (Some(cost), plan),
            None => (None, None),
        };
        let headers = context.headers;
        let penalty = route
            .and_then(|r| r.penalty.clone())
            .filter(|_| cost.is_some());
        let count_when = route
            .and_then(|r| r.count_when.clone())
            .filter(|_| cost.is_some());
        Ok(Some(RequestChecks {
            cost,
            concurrency,
            wait,
            penalty,
            count_when,
            reading: Reading {
                headers,
                shadow,
                plan,
                cost,
                overridden: in_force.overridden.is_some(),
            },
        }))
    }

    /// The pipeline's policy in force on this limit under the router layer
    /// `context`: its live override, and shadow mode by the limit's
    /// settings, the router layer's, or the override's.
    pub(crate) fn in_force(&self, context: &Context) -> InForce {
        self.named
            .in_force(&context.shared, self.shadow_set(context))
    }

    /// Whether shadow mode is set on this limit or its router layer.
    pub(crate) fn shadow_set(&self, context: &Context) -> bool {
        self.options.as_deref().is_some_and(|r| r.common.shadow)
            || context.options.as_deref().is_some_and(|l| l.shadow)
    }

    /// The cost a request is checked with, and the policy replacing the
    /// limit's: a live override's, else its plan's (when the limit has a
    /// plan resolver and it finds one; else the limit's own applies);
    /// `None` when the request is not rate limited (an unlimited plan, a
    /// cost of 0). A cost no request could pay is refused.
    #[allow(clippy::result_large_err)]
    fn rate_check<B>(
        &self,
        route: Option<&RouteOptions>,
        request: &mut Request<B>,
        in_force: &InForce,
    ) -> Result<Option<RateCheck>, Response> {
        let resolve = route.and_then(|r| r.plans.as_ref());
        let plan = || resolve.and_then(|resolve| with_parts(request, |parts| resolve(parts)));
        let plan_fields = match self.named.rules(in_force, plan) {
            Rules::Unlimited => {
                self.record(Counted::UnlimitedPlan);
                return Ok(None);
            }
            Rules::Compiled => None,
            Rules::Override(policy) => {
                let names = policy.names().into();
                Some(PlanFields::new(policy, names))
            }
            Rules::Plan(policy, names) => Some(PlanFields::new(policy, names)),
        };
        let policy = plan_fields
            .as_ref()
            .map_or(self.policy(), |plan| &plan.policy);
        let cost = match route.and_then(|r| r.cost.as_ref()) {
            Some(cost_of) => with_parts(request, |parts| cost_of(parts)),
            None => policy.cost(),
        };
        if cost == 0 {
            return Ok(None);
        }
        if let Err(error) = policy.validate_cost(cost) {
            self.record(Counted::CostRefused);
            let detail = format!("This request can never pass the rate limit: {error}.");
            let protocol = Protocol::of(request.headers());
            return Err(response::problem(
                protocol,
                StatusCode::TOO_MANY_REQUESTS,
                &detail,
            ));
        }
        Ok(Some(RateCheck {
            cost,
            plan: plan_fields,
        }))
    }
}
