//! What a request is checked with, before the store is asked: the limit's
//! own policy, or, for a limit with business features, what its settings
//! and the router layer's make of the request (an allow list's bypass, a
//! plan's policy, a cost from the request, shadow mode, waiting, a
//! concurrency permit).

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use http::{Request, StatusCode};
use limiter_core::{ConcurrencyLimit, MaxWait, Override, OverrideMode, Penalty, Policy};

use super::answer::{PlanFields, Reading};
use super::counters::Counted;
use super::identity::{client_ip, with_parts};
use super::route::RouteLimit;
use crate::business::{ClientList, Common, CountWhen, RouteBusiness};
use crate::context::{Context, OverrideCheck};
use crate::response::{self, Protocol, RouteFields};

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
    /// Whether an allow list, the limit's or the router layer's, lets the
    /// request bypass this limit: its client address (found as for
    /// `by = ip`) or its identity for this limit.
    #[cold]
    #[inline(never)]
    pub(crate) fn bypasses<B>(&self, context: &Context, request: &mut Request<B>) -> bool {
        self.on_list(context, request, |common| &common.allow)
    }

    /// Whether a deny list, the limit's or the router layer's, refuses the
    /// request, found as for [`bypasses`](Self::bypasses).
    pub(crate) fn is_denied<B>(&self, context: &Context, request: &mut Request<B>) -> bool {
        self.on_list(context, request, |common| &common.deny)
    }

    /// Whether the request's client or identity is on the list `list`
    /// picks, of the limit's or the router layer's settings.
    fn on_list<B>(
        &self,
        context: &Context,
        request: &mut Request<B>,
        list: impl Fn(&Common) -> &ClientList,
    ) -> bool {
        let lists = [
            self.business.as_deref().map(|r| list(&r.common)),
            context.business.as_deref().map(&list),
        ];
        let lists = || lists.into_iter().flatten().filter(|l| !l.is_empty());
        if lists().any(ClientList::has_nets)
            && let Some(ip) = client_ip(context, request)
            && lists().any(|l| l.holds_ip(ip))
        {
            return true;
        }
        if lists().any(ClientList::has_identities)
            && let Some(identity) = self.identity(context, request)
        {
            return lists().any(|l| l.holds_identity(&identity));
        }
        false
    }

    /// Whether the list `list` picks, of the limit's or the router layer's
    /// settings, holds `identity`, for a check made without a request: an
    /// address by the list's networks, any identity by the list's
    /// identities.
    pub(crate) fn lists_identity(
        &self,
        context: &Context,
        identity: &limiter_core::Identity,
        list: impl Fn(&Common) -> &ClientList,
    ) -> bool {
        let lists = [
            self.business.as_deref().map(|r| list(&r.common)),
            context.business.as_deref().map(&list),
        ];
        let mut lists = lists
            .into_iter()
            .flatten()
            .filter(|l| !l.is_empty())
            .peekable();
        if lists.peek().is_none() {
            return false;
        }
        let mut text = String::new();
        identity.push_key(&mut text);
        let address = identity
            .address()
            .and_then(|(ip, prefix)| prefix.is_none().then_some(ip));
        lists.any(|l| address.is_some_and(|ip| l.holds_ip(ip)) || l.holds_identity(&text))
    }

    /// Whether a live override may hold on this limit: the store holds
    /// some (one load when it holds none).
    #[inline]
    pub(crate) fn may_be_overridden(&self, context: &Context) -> bool {
        match &context.overrides {
            OverrideCheck::None => false,
            OverrideCheck::Table(table) => !table.is_empty(),
            OverrideCheck::Ask => true,
        }
    }

    /// The live override of this limit: what every check of it, and a
    /// peek, takes first.
    pub(crate) fn override_of(&self, context: &Context) -> Option<Arc<Override>> {
        self.override_left(context).map(|(found, _)| found)
    }

    /// The live override of this limit and its time left.
    pub(crate) fn override_left(&self, context: &Context) -> Option<(Arc<Override>, Duration)> {
        if !self.may_be_overridden(context) {
            return None;
        }
        let overrides = context.store.capabilities().as_overrides()?;
        overrides.override_of(&self.name)
    }

    /// How a request to a limit with business features (or a live
    /// override) is checked; `None` when it is not checked at all (an
    /// unlimited plan, a cost of 0, a limit switched off, and no
    /// concurrency limit). A cost no request could pay is refused.
    #[cold]
    #[inline(never)]
    #[allow(clippy::result_large_err)]
    pub(crate) fn business_checks<B>(
        &self,
        context: &Context,
        request: &mut Request<B>,
    ) -> Result<Option<RequestChecks>, Response> {
        let route = self.business.as_deref();
        let layer = context.business.as_deref();
        let overridden = self.override_of(context);
        let overridden = overridden.as_deref();
        let mode = overridden.map(Override::mode);
        if mode == Some(OverrideMode::Off) {
            self.record_as(Counted::OverrideOff, true);
            return Ok(None);
        }
        let shadow = self.in_shadow(context, mode);
        let rate = match route {
            Some(route) if !route.rate => None,
            _ => self.rate_check(route, request, overridden.and_then(Override::shared_policy))?,
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
                overridden: overridden.is_some(),
            },
        }))
    }

    /// Whether this limit's denials are shadowed: by its settings, the
    /// router layer's, or an override in `mode`.
    pub(crate) fn in_shadow(&self, context: &Context, mode: Option<OverrideMode>) -> bool {
        self.business.as_deref().is_some_and(|r| r.common.shadow)
            || context.business.as_deref().is_some_and(|l| l.shadow)
            || mode == Some(OverrideMode::Shadow)
    }

    /// The cost a request is checked with, and the policy replacing the
    /// limit's: a live override's (`overriding`), else its plan's (when
    /// the limit has a plan resolver and it finds one; else the limit's own
    /// applies); `None` when the request is not rate limited (an unlimited
    /// plan, a cost of 0). A cost no request could pay is refused.
    #[allow(clippy::result_large_err)]
    fn rate_check<B>(
        &self,
        route: Option<&RouteBusiness>,
        request: &mut Request<B>,
        overriding: Option<&Arc<Policy>>,
    ) -> Result<Option<RateCheck>, Response> {
        let mut plan_fields = None;
        if let Some(policy) = overriding {
            // An incident's rules hold for every request, whatever its plan.
            let names: Box<[String]> = policy.names().into();
            plan_fields = Some(Box::new(PlanFields {
                fields: RouteFields::named(policy, &names),
                names,
                policy: Arc::clone(policy),
            }));
        } else if let Some(resolve) = route.and_then(|r| r.plans.as_ref())
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
                    let names: Box<[String]> = plan.names().into();
                    plan_fields = Some(Box::new(PlanFields {
                        fields: RouteFields::named(found, &names),
                        names,
                        policy: Arc::new(found.clone()),
                    }));
                }
            }
        }
        let policy = plan_fields
            .as_ref()
            .map_or(&self.policy, |plan| &plan.policy);
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
