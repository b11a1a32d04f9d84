use std::sync::{Arc, OnceLock};

use http::HeaderValue;
use limiter_core::{Error, OnStoreError, Policy, Verdict, push_identity};
use tower_layer::Layer;

use super::Limit;
use crate::key::KeySource;
use crate::response::{policy_header, rate_limit_prefixes};

/// One policy and one key source, on a route, a handler or any service: the
/// same limiting as `#[rate_limit]`, without the macro.
///
/// The store comes from the [`RateLimitLayer`](crate::RateLimitLayer) on the
/// router, so a `LimitLayer` works only below one (without it, requests are
/// answered 500 and the reason is logged). Keys are
/// `{prefix}:{identity}:{name}`.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::post};
/// use limiter_tower::{KeySource, Limiter, LimitLayer, MemoryStore, Policy, RateLimitLayer, Rule};
///
/// let uploads = Policy::sliding_log([Rule::new(3, Duration::from_secs(60))?])?;
/// let app: Router = Router::new()
///     .route(
///         "/uploads",
///         post(|| async { "stored" }).layer(LimitLayer::new("uploads", uploads, KeySource::ip())),
///     )
///     .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new())));
/// # Ok::<(), limiter_tower::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LimitLayer {
    pub(crate) limit: Arc<RouteLimit>,
}

#[derive(Debug, Clone)]
pub(crate) struct RouteLimit {
    pub(crate) name: Box<str>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) source: KeySource,
    pub(crate) key_prefix: Option<Box<str>>,
    pub(crate) message: Option<Box<str>>,
    pub(crate) on_store_error: Option<OnStoreError>,
    pub(crate) policy_header: HeaderValue,
    pub(crate) rate_limit_prefixes: Box<[Box<str>]>,
    pub(crate) counters: DecisionCounters,
    /// Whether allowed requests carry their [`Decision`](limiter_core::Decision).
    pub(crate) decision_extension: bool,
}

/// This route's `limiter_decisions_total` counters, registered on first use
/// so a request does not build labels.
#[derive(Debug, Clone, Default)]
pub(crate) struct DecisionCounters {
    counters: [OnceLock<metrics::Counter>; OUTCOMES.len()],
}

const OUTCOMES: [(&str, &str); 9] = [
    ("allowed", "store"),
    ("denied", "store"),
    ("denied", "deny_cache"),
    ("allowed", "fallback"),
    ("denied", "fallback"),
    ("allowed", "fail_open"),
    ("refused", "fail_closed"),
    ("other", "other"),
    ("error", "error"),
];

impl DecisionCounters {
    /// Counts a verdict in `limiter_decisions_total`.
    pub(crate) fn record(&self, verdict: &Result<Verdict, Error>, limit: &RouteLimit) {
        // Indexes `OUTCOMES`.
        let index = match verdict {
            Ok(Verdict::Store(d)) => usize::from(!d.allowed()),
            Ok(Verdict::Cached(_)) => 2,
            Ok(Verdict::Fallback(d)) => 3 + usize::from(!d.allowed()),
            Ok(Verdict::FailedOpen) => 5,
            Ok(Verdict::FailedClosed { .. }) => 6,
            Ok(_) => 7,
            Err(_) => 8,
        };
        self.counters[index]
            .get_or_init(|| {
                let (outcome, source) = OUTCOMES[index];
                metrics::counter!(
                    "limiter_decisions_total",
                    "outcome" => outcome,
                    "source" => source,
                    "algorithm" => limit.policy.algorithm().name(),
                    "limit" => limit.name.to_string(),
                )
            })
            .increment(1);
    }
}

impl LimitLayer {
    /// A limit named `name` (the last part of its keys, escaped like an
    /// identity) applying `policy` per `source`.
    pub fn new(name: impl AsRef<str>, policy: Policy, source: KeySource) -> Self {
        let mut escaped = String::new();
        push_identity(&mut escaped, name.as_ref());
        Self {
            limit: Arc::new(RouteLimit {
                name: escaped.into(),
                policy_header: policy_header(&policy),
                rate_limit_prefixes: rate_limit_prefixes(&policy),
                policy: Arc::new(policy),
                source,
                key_prefix: None,
                message: None,
                on_store_error: None,
                counters: DecisionCounters::default(),
                decision_extension: true,
            }),
        }
    }

    fn limit(&mut self) -> &mut RouteLimit {
        Arc::make_mut(&mut self.limit)
    }

    /// The body of this route's 429 (`text/plain`) instead of the problem+json body.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.limit().message = Some(message.into().into_boxed_str());
        self
    }

    /// What to decide on this route when the store fails, instead of the
    /// router layer's [`on_store_error`](crate::RateLimitLayer::on_store_error).
    pub fn on_store_error(mut self, policy: OnStoreError) -> Self {
        self.limit().on_store_error = Some(policy);
        self
    }

    /// Whether an allowed request carries its [`Decision`](limiter_core::Decision)
    /// as a request extension, for the service below to read
    /// (`Extension<Decision>` in a handler). On by default; switch it off
    /// when nothing reads it: inserting it costs about as much as the memory
    /// store's check. (`#[rate_limit]` puts it in only for handlers that take
    /// it.)
    pub fn decision_extension(mut self, on: bool) -> Self {
        self.limit().decision_extension = on;
        self
    }

    /// The key prefix for this route instead of the router layer's.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.limit().key_prefix = Some(prefix.into().into_boxed_str());
        self
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Limit::new(inner, Arc::clone(&self.limit))
    }
}
