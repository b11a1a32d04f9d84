//! One route's limit, as a [`LimitLayer`](crate::LimitLayer) or
//! `#[rate_limit]` configures it, and the answers it gives without asking
//! the store. [`Limit`](super::Limit) hands each request to its one
//! admission path ([`call`](RouteLimit::call)).

use std::sync::Arc;
use std::time::Duration;

use http::Request;
use limiter_core::{Identity, OnStoreError, Policy, TopDenied};

use super::counters::{Counted, DecisionCounters, ShadowCounter};
use super::future::Next;
use super::identity::NoKey;
use crate::business::RouteBusiness;
use crate::context::Context;
use crate::key::KeySource;
use crate::misconfigured::Missing;
use crate::response::{self, Protocol, RouteFields};

/// One policy and one key source, as a [`LimitLayer`](crate::LimitLayer)
/// or `#[rate_limit]` configures them.
#[derive(Debug, Clone)]
pub(crate) struct RouteLimit {
    /// The last part of the keys, escaped like an identity.
    pub(crate) name: Box<str>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) source: KeySource,
    /// This route's key prefix followed by `:`, instead of the router layer's.
    pub(crate) key_start: Option<Box<str>>,
    pub(crate) message: Option<Box<str>>,
    pub(crate) on_store_error: Option<OnStoreError>,
    pub(crate) fields: RouteFields,
    pub(crate) counters: DecisionCounters,
    /// Whether allowed requests carry their [`Decision`](limiter_core::Decision).
    pub(crate) decision_extension: bool,
    /// Plans, allow lists, shadow mode, waiting, concurrency, costs: `None`
    /// when none is configured, so a plain limit pays one test for them.
    pub(crate) business: Option<Box<RouteBusiness>>,
    pub(crate) shadow_counter: ShadowCounter,
    /// Whether blocks deny this limit's requests.
    pub(crate) honours_blocks: bool,
    /// The router layer's settings when the limit carries them itself
    /// ([`LimitLayer::router_layer`](crate::LimitLayer::router_layer)):
    /// then it looks for no router layer above it.
    pub(crate) context: Option<Arc<Context>>,
    /// The identities this limit denied most lately, on this instance
    /// ([`Control::top_denied`](crate::Control::top_denied)).
    pub(crate) offenders: Arc<TopDenied>,
}

impl RouteLimit {
    pub(crate) fn new(name: &str, policy: Policy, source: KeySource) -> Self {
        let mut escaped = String::new();
        limiter_core::push_identity(&mut escaped, name);
        Self {
            name: escaped.into(),
            fields: RouteFields::new(&policy),
            policy: Arc::new(policy),
            source,
            key_start: None,
            message: None,
            on_store_error: None,
            counters: DecisionCounters::default(),
            decision_extension: true,
            business: None,
            shadow_counter: ShadowCounter::default(),
            honours_blocks: true,
            context: None,
            offenders: Arc::new(TopDenied::new()),
        }
    }

    /// Counts a denial of the request among the limit's offenders, under
    /// its identity (found again: denials are the cold path). A global
    /// limit's requests have no identity: nothing is counted.
    #[cold]
    #[inline(never)]
    pub(crate) fn record_denial<B>(&self, context: &Context, request: &mut Request<B>) {
        if let Some(identity) = self.typed_identity(context, request) {
            self.record_denial_of(&identity);
        }
    }

    /// Counts a denial of `identity` among the limit's offenders.
    pub(crate) fn record_denial_of(&self, identity: &Identity) {
        self.offenders.record_identity(identity);
    }

    /// Counts one answer of this limit's rate check.
    #[inline]
    pub(crate) fn record(&self, counted: Counted) {
        self.record_as(counted, false);
    }

    /// Counts one answer of this limit's rate check, apart when a live
    /// override decided it.
    #[inline]
    pub(crate) fn record_as(&self, counted: Counted, overridden: bool) {
        let algorithm = || self.policy.algorithm().name();
        self.counters
            .record(counted, algorithm, &self.name, overridden);
    }

    /// The answer to a request no key could be built for.
    pub(crate) fn refuse<B>(&self, no_key: NoKey, context: &Context, request: &Request<B>) -> Next {
        match no_key {
            NoKey::NotInRequest => Next::Respond(response::problem(
                Protocol::of(request.headers()),
                context.missing_identity,
                &format!(
                    "This route is rate limited per {}, and the request carries none.",
                    self.identity_name()
                ),
            )),
            NoKey::NotSetUp(missing) => self.misconfigured(missing, request),
        }
    }

    /// The answer to a request whose identity is blocked.
    #[cold]
    #[inline(never)]
    pub(crate) fn blocked<B>(
        &self,
        left: Duration,
        context: &Context,
        request: &mut Request<B>,
    ) -> Next {
        self.record(Counted::Blocked);
        self.record_denial(context, request);
        tracing::debug!(limit = %self.name, ?left, "blocked");
        Next::Respond(response::blocked(Protocol::of(request.headers()), left))
    }

    /// The answer to a request on a deny list.
    #[cold]
    #[inline(never)]
    pub(crate) fn deny_listed<B>(&self, request: &Request<B>) -> Next {
        self.record(Counted::DenyListed);
        Next::Respond(response::deny_listed(Protocol::of(request.headers())))
    }

    pub(crate) fn misconfigured<B>(&self, missing: Missing, request: &Request<B>) -> Next {
        Next::Respond(missing.response(&self.name, Protocol::of(request.headers())))
    }
}
