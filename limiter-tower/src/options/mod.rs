//! What a limit can add to its policy: a policy from the request's
//! plan, allow lists, shadow mode, waiting instead of 429, a concurrency
//! limit and a cost computed from the request. Configured on the layers;
//! none of it costs a request anything when it is not configured.

mod clients;
mod limit_setters;

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use limiter_core::{ConcurrencyLimit, MaxWait, Plan};

pub(crate) use clients::ClientList;

use crate::response::RouteFields;
use limiter_core::decide::{DecisionCounters, ShadowCounter};

/// Finds the plan of a request: `None` keeps the limit's own policy.
pub(crate) type PlanResolver = Arc<dyn Fn(&Parts) -> Option<Plan> + Send + Sync>;
/// What a request costs.
pub(crate) type CostResolver = Arc<dyn Fn(&Parts) -> u64 + Send + Sync>;
/// Whether a request asks to wait instead of being denied.
pub(crate) type WaitWhen = Arc<dyn Fn(&Parts) -> bool + Send + Sync>;

/// Whether a response counts against its limit (see
/// [`LimitLayer::count_when`](crate::LimitLayer::count_when)).
pub(crate) type CountWhen = Arc<dyn Fn(http::StatusCode, &http::HeaderMap) -> bool + Send + Sync>;

/// What both layers can set: the router layer for every limit below it, a
/// limit for itself (see [`common_setters`](crate::setters::common_setters)).
#[derive(Clone, Default)]
pub(crate) struct CommonOptions {
    pub(crate) allow: ClientList,
    pub(crate) deny: ClientList,
    pub(crate) shadow: bool,
    pub(crate) wait: Option<MaxWait>,
}

/// What one route's limit adds to its policy.
#[derive(Clone)]
pub(crate) struct RouteOptions {
    /// Whether the route has a rate limit besides its concurrency limit.
    pub(crate) rate: bool,
    pub(crate) common: CommonOptions,
    pub(crate) plans: Option<PlanResolver>,
    pub(crate) wait_when: Option<WaitWhen>,
    pub(crate) cost: Option<CostResolver>,
    pub(crate) concurrency: Option<Concurrency>,
    /// Denials of an identity earn it a block.
    pub(crate) penalty: Option<Arc<limiter_core::Penalty>>,
    /// Requests count only when their response says so.
    pub(crate) count_when: Option<CountWhen>,
}

impl Default for RouteOptions {
    fn default() -> Self {
        Self {
            rate: true,
            common: CommonOptions::default(),
            plans: None,
            wait_when: None,
            cost: None,
            concurrency: None,
            penalty: None,
            count_when: None,
        }
    }
}

/// A route's concurrency limit, its fields and counters.
#[derive(Debug, Clone)]
pub(crate) struct Concurrency {
    pub(crate) limit: ConcurrencyLimit,
    pub(crate) fields: RouteFields,
    pub(crate) names: Arc<[String]>,
    pub(crate) counters: DecisionCounters,
    pub(crate) shadow_counter: ShadowCounter,
}

impl Concurrency {
    pub(crate) fn new(limit: ConcurrencyLimit) -> Self {
        Self {
            fields: RouteFields::concurrency(&limit),
            names: Arc::new([limit.name()]),
            limit,
            counters: DecisionCounters::default(),
            shadow_counter: ShadowCounter::default(),
        }
    }
}

impl fmt::Debug for CommonOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommonOptions")
            .field("allow", &self.allow)
            .field("shadow", &self.shadow)
            .field("wait", &self.wait)
            .finish()
    }
}

impl fmt::Debug for RouteOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteOptions")
            .field("rate", &self.rate)
            .field("common", &self.common)
            .field("plans", &self.plans.as_ref().map(|_| ".."))
            .field("wait_when", &self.wait_when.as_ref().map(|_| ".."))
            .field("cost", &self.cost.as_ref().map(|_| ".."))
            .field("concurrency", &self.concurrency)
            .finish()
    }
}
