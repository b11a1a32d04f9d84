//! What a request's check is read with ([`Reading`]): its shadow mode,
//! plan and cost; and how its response settles a request counted by
//! outcome. The store's part of the check is the pipeline's
//! ([`limiter_core::decide::admit`]).

use std::sync::Arc;
use std::task::Context;

use limiter_core::Policy;
use limiter_core::decide::{Detached, Refund};

use super::route::RouteLimit;
use crate::options::CountWhen;
use crate::response::{HeaderOptions, Refusal, RouteFields};

/// How a request's answer is read.
pub(crate) struct Reading {
    pub(crate) headers: HeaderOptions,
    /// Shadow mode: denials are counted and logged, never enforced.
    pub(crate) shadow: bool,
    /// The request's plan, whose fields and names replace the limit's.
    pub(crate) plan: Option<Box<PlanFields>>,
    /// The request's cost, when it is not the policy's (a cost resolver).
    pub(crate) cost: Option<u64>,
    /// A live override holds: the decision is counted apart.
    pub(crate) overridden: bool,
}

impl Reading {
    /// How the answer of a limit without options is read.
    #[inline]
    pub(crate) fn plain(headers: HeaderOptions) -> Self {
        Self {
            headers,
            shadow: false,
            plan: None,
            cost: None,
            overridden: false,
        }
    }

    /// The policy the request is checked with: its plan's, or the limit's.
    #[inline]
    pub(crate) fn policy<'a>(&'a self, limit: &'a RouteLimit) -> &'a Arc<Policy> {
        self.plan
            .as_ref()
            .map_or(limit.policy(), |plan| &plan.policy)
    }
}

/// The policy, fields and item names of a request's plan.
pub(crate) struct PlanFields {
    pub(crate) policy: Arc<Policy>,
    pub(crate) fields: RouteFields,
    pub(crate) names: Box<[String]>,
}

impl PlanFields {
    /// The fields of `policy`, its items named `names`.
    pub(crate) fn new(policy: Arc<Policy>, names: Box<[String]>) -> Box<Self> {
        Box::new(Self {
            fields: RouteFields::named(&policy, &names),
            names,
            policy,
        })
    }
}

/// A request counted by outcome, and what says whether it counts.
pub(crate) struct Settle {
    pub(crate) refund: Box<Refund>,
    pub(crate) counts: CountWhen,
}

impl Settle {
    /// Gives the request back unless its response says it counts: `None`
    /// when it counts or the refund is made already (the memory store's,
    /// on the first poll), else the refund under way. A response the
    /// limiter made itself (another limit's 429, a block, a refusal) never
    /// counts: the handler decided no outcome.
    pub(crate) fn settle<B>(
        self,
        response: &http::Response<B>,
        cx: &mut Context<'_>,
    ) -> Option<Detached> {
        let refused = response.extensions().get::<Refusal>().is_some();
        if !refused && (self.counts)(response.status(), response.headers()) {
            return None;
        }
        Detached::start(Box::pin(self.refund.run()), cx)
    }
}
