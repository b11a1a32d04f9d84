//! The path of a limit with business features: allow lists, a plan's
//! policy, a cost from the request, shadow mode, waiting for the retry time
//! and a concurrency permit. A limit without any of them never comes here.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use http::{Request, StatusCode};
use limiter_core::{Error, Policy, Verdict};
use tower_service::Service;

use super::ResponseFuture;
use super::admission::{Admission, Checks, admit};
use super::counters::Counted;
use super::route::{RouteLimit, with_parts};
use crate::business::{AllowList, RouteBusiness};
use crate::context::{Context, HeaderOptions};
use crate::key::Source;
use crate::response::{self, Protocol, RateLimitHeaders, RouteFields};
use crate::scope::Current;

/// What waits for the checks: a ready inner service and the request.
pub(crate) struct Admitting<S, B> {
    pub(crate) inner: S,
    pub(crate) request: Request<B>,
    pub(crate) limit: Arc<RouteLimit>,
    pub(crate) admitted: Admitted,
}

/// How a request's checks are read once answered.
pub(crate) struct Admitted {
    headers: HeaderOptions,
    shadow: bool,
    /// The fields and names of the request's plan, instead of the limit's.
    plan: Option<Box<PlanFields>>,
}

/// The fields and item names of a request's plan, and the request's cost.
struct PlanFields {
    fields: RouteFields,
    names: Box<[String]>,
    cost: u64,
}

/// The rate check a request gets: its policy and cost.
struct RateCheck {
    policy: Arc<Policy>,
    cost: u64,
    plan: Option<Box<PlanFields>>,
}

impl RouteLimit {
    /// Checks a request of a limit with business features (see the module).
    #[cold]
    #[inline(never)]
    pub(crate) fn call_extended<S, B>(
        self: &Arc<Self>,
        current: Current,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let context = current.context().expect("the caller found the context");
        let route = self.business.as_deref();
        let layer = context.business.as_deref();
        // An allowed client needs no identity for this limit.
        let allowed = [route.map(|r| &r.allow), layer.map(|l| &l.allow)];
        if self.bypasses(allowed, context, &mut request) {
            self.record(Counted::Bypassed);
            drop(current);
            return ResponseFuture::proceed(inner, request, None, Duration::ZERO);
        }
        let mut key = String::new();
        if let Err(no_key) = self.write_key(&mut key, context, &mut request) {
            return self.refuse(no_key, context, &request);
        }
        let shadow = route.is_some_and(|r| r.shadow) || layer.is_some_and(|l| l.shadow);
        let rate = match route {
            Some(route) if !route.rate => None,
            _ => match self.rate_check(route, &mut request) {
                Ok(rate) => rate,
                Err(refused) => return ResponseFuture::respond(refused),
            },
        };
        let concurrency = route
            .and_then(|r| r.concurrency.as_ref())
            .map(|c| (format!("{key}:concurrent"), c.limit));
        if rate.is_none() && concurrency.is_none() {
            drop(current);
            return ResponseFuture::proceed(inner, request, None, Duration::ZERO);
        }
        // Shadow mode denies nothing, so it makes nobody wait either.
        let wait = route
            .and_then(|r| r.wait)
            .or(layer.and_then(|l| l.wait))
            .filter(|_| !shadow)
            .filter(|_| {
                route
                    .and_then(|r| r.wait_when.as_ref())
                    .is_none_or(|when| with_parts(&mut request, |parts| when(parts)))
            });
        let on_error = self.on_store_error.or(context.on_store_error);
        let (policy, plan) = match rate {
            Some(RateCheck { policy, cost, plan }) => (Some((policy, cost)), plan),
            None => (None, None),
        };
        let admission = admit(Checks {
            store: Arc::clone(&context.store),
            key,
            rate: policy,
            concurrency,
            on_error,
            waiters: wait.map(|max| (context.waiters.clone(), max.get())),
            shadow,
        });
        let admitted = Admitted {
            headers: context.headers,
            shadow,
            plan,
        };
        drop(current);
        let clone = inner.clone();
        ResponseFuture::admitting(
            admission,
            Admitting {
                inner: std::mem::replace(inner, clone),
                request,
                limit: Arc::clone(self),
                admitted,
            },
        )
    }

    /// Whether an allow list lets the request bypass this limit: its client
    /// address (found as for `by = ip`) or its identity for this limit.
    fn bypasses<B>(
        &self,
        lists: [Option<&AllowList>; 2],
        context: &Context,
        request: &mut Request<B>,
    ) -> bool {
        let lists = || lists.into_iter().flatten().filter(|l| !l.is_empty());
        if lists().any(AllowList::has_nets)
            && let Some(ip) = client_ip(context, request)
            && lists().any(|l| l.allows_ip(ip))
        {
            return true;
        }
        if lists().any(AllowList::has_identities)
            && let Some(identity) = self.identity(context, request)
        {
            return lists().any(|l| l.allows_identity(&identity));
        }
        false
    }

    /// The request's identity for this limit, as its key source finds it
    /// (before escaping); `None` for a global limit.
    fn identity<B>(&self, context: &Context, request: &mut Request<B>) -> Option<String> {
        match &self.source.0 {
            Source::Ip => client_ip(context, request).map(|ip| ip.to_string()),
            Source::User => {
                let resolve = context.user.as_ref()?;
                with_parts(request, |parts| resolve(parts))
            }
            Source::Header(name) => {
                let value = request.headers().get(name)?;
                String::from_utf8(value.as_bytes().to_vec()).ok()
            }
            Source::Global => None,
            Source::Custom(resolve) => with_parts(request, |parts| resolve(parts)),
        }
    }

    /// The policy and cost a request is checked with: the plan's (when the
    /// limit has a plan resolver and it finds one), else the limit's; `None`
    /// when the request is not rate limited (an unlimited plan, a cost of
    /// 0). A cost no request could pay is refused.
    #[allow(clippy::result_large_err)]
    fn rate_check<B>(
        &self,
        route: Option<&RouteBusiness>,
        request: &mut Request<B>,
    ) -> Result<Option<RateCheck>, axum::response::Response> {
        let mut policy = Arc::clone(&self.policy);
        let mut plan_fields = None;
        if let Some(resolve) = route.and_then(|r| r.plans.as_ref())
            && let Some(plan) = with_parts(request, |parts| resolve(parts))
        {
            match plan.policy() {
                None => {
                    self.record(Counted::UnlimitedPlan);
                    return Ok(None);
                }
                // A key's state carries only between policies of one
                // algorithm (`Plans` refuses others).
                Some(found) if found.algorithm() != self.policy.algorithm() => {
                    tracing::error!(
                        limit = %self.name,
                        plan = plan.name(),
                        "the plan runs {}, the limit {}: the limit's own policy applies",
                        found.algorithm(),
                        self.policy.algorithm()
                    );
                }
                Some(found) => {
                    policy = Arc::new(found.clone());
                    let names: Box<[String]> = plan.names().into();
                    let fields = RouteFields::named(found, &names);
                    plan_fields = Some(Box::new(PlanFields {
                        fields,
                        names,
                        cost: found.cost(),
                    }));
                }
            }
        }
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
        if let Some(plan) = &mut plan_fields {
            plan.cost = cost;
        }
        Ok(Some(RateCheck {
            policy,
            cost,
            plan: plan_fields,
        }))
    }

    /// What follows a request's checks: the inner call (holding the permit,
    /// with the fields), or the limiter's own answer.
    pub(crate) fn admitted<S, B>(
        &self,
        admission: Admission,
        admitted: Admitted,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let Admitted {
            headers: options,
            shadow,
            plan,
        } = admitted;
        let mut permit = None;
        let mut concurrency_fields = None;
        if let Some(acquired) = admission.permit {
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
                    return self.failed(error, shadow, inner, request);
                }
            };
            let decision = *acquired.decision();
            if acquired.allowed() {
                record(Counted::StoreAllowed);
                permit = acquired.permit();
            } else {
                record(Counted::StoreDenied);
                if !shadow {
                    return ResponseFuture::respond(response::too_many_requests(
                        Protocol::of(request.headers()),
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
            concurrency_fields = (options.on_allowed || !decision.allowed())
                .then(|| concurrency.fields.of(&decision, options));
        }
        let mut fields = None;
        let mut delay = Duration::ZERO;
        if let Some(verdict) = admission.verdict {
            let verdict = match verdict {
                Ok(verdict) => verdict,
                Err(error) => return self.failed(error, shadow, inner, request),
            };
            let counted = Counted::of(&verdict);
            self.record(counted);
            match verdict {
                Verdict::FailedClosed { retry_after } if !shadow => {
                    let protocol = Protocol::of(request.headers());
                    return ResponseFuture::respond(response::unavailable(protocol, retry_after));
                }
                verdict => {
                    if let Some(decision) = verdict.decision() {
                        let (route_fields, names, cost) = match &plan {
                            Some(plan) => (&plan.fields, &plan.names[..], plan.cost),
                            None => (&self.fields, &[][..], self.policy.cost()),
                        };
                        if !decision.allowed() && !shadow {
                            let own_names;
                            let names = if plan.is_some() {
                                names
                            } else {
                                own_names = self.policy.names();
                                &own_names[..]
                            };
                            return ResponseFuture::respond(response::too_many_requests(
                                Protocol::of(request.headers()),
                                decision,
                                names,
                                cost,
                                route_fields.of(decision, options),
                                self.message.as_deref(),
                            ));
                        }
                        if decision.allowed() {
                            delay = decision.delay();
                        } else {
                            self.shadow_counter
                                .record(self.policy.algorithm().name(), &self.name);
                            tracing::info!(
                                limit = %self.name,
                                rule = %decision.rule(),
                                "shadow mode: would have been rate limited"
                            );
                        }
                        fields = (options.on_allowed || !decision.allowed())
                            .then(|| route_fields.of(decision, options));
                        if self.decision_extension {
                            request.extensions_mut().insert(*decision);
                        }
                    }
                }
            }
        }
        let fields = match (fields, concurrency_fields) {
            (Some(rate), Some(concurrency)) => Some(RateLimitHeaders::join(rate, concurrency)),
            (rate, concurrency) => rate.or(concurrency),
        };
        ResponseFuture::proceed_holding(inner, request, fields, delay, permit)
    }

    /// A store error: 503, or in shadow mode the inner call.
    fn failed<S, B>(
        &self,
        error: Error,
        shadow: bool,
        inner: &mut S,
        request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        if !shadow {
            return self.on_error(error, &request);
        }
        self.record(Counted::Error);
        tracing::error!(limit = %self.name, %error, "the rate limiter failed (shadow mode)");
        ResponseFuture::proceed(inner, request, None, Duration::ZERO)
    }
}

/// The client's address as `by = ip` finds it, when the request carries
/// its peer address.
fn client_ip<B>(context: &Context, request: &Request<B>) -> Option<IpAddr> {
    let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
    Some(context.client_ip.resolve(peer.ip(), request.headers()))
}
