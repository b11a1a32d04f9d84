//! The per-route limit: one policy and one key source on a route, a
//! handler or any service. The `#[rate_limit]` attribute generates one per
//! handler.
//!
//! - this file: [`LimitLayer`], what configures a limit, and [`Limit`],
//!   the service it wraps around the one below;
//! - `route`: the limit itself ([`RouteLimit`]): who a request is for it,
//!   and its counters;
//! - `decide`: how a request is decided, top to bottom: the steps of the
//!   pipeline ([`limiter_core::decide`]) with what HTTP adds;
//! - `admission`: what a request's check is read with, and how its
//!   response settles a request counted by outcome;
//! - `answer`: how the store's answer, or a refusal without it, becomes
//!   the inner call or the limiter's own response;
//! - `future`: the response future that waits for the store and the
//!   inner service.

mod admission;
mod answer;
mod decide;
mod future;
mod route;

pub use future::ResponseFuture;
pub(crate) use route::RouteLimit;

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::BoxError;
use axum::body::{Bytes, HttpBody};
use axum::response::Response;
use http::Request;
use limiter_core::{OnStoreError, Policy};
use tower_layer::Layer;
use tower_service::Service;

use crate::LimiterLayer;
use crate::key::KeySource;
use crate::options::CommonOptions;
use crate::setters::{Configure, common_setters};

/// One policy and one key source, on a route, a handler or any service: the
/// same limiting as `#[rate_limit]`, without the macro.
///
/// The store comes from the [`LimiterLayer`] above it, so a `LimitLayer`
/// works below one: on an axum route, with the `LimiterLayer` on the
/// router (added after the route); around any other service, with the
/// `LimiterLayer` outside it. Without one, requests are answered 500,
/// naming the fix in debug builds, unless the limit was given a router
/// layer's settings itself ([`router_layer`](Self::router_layer)). Keys are
/// `{prefix}:{identity}:{name}`.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::post};
/// use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
///
/// let uploads = Policy::sliding_log([Rule::new(3, Duration::from_secs(60))?])?;
/// let app: Router = Router::new()
///     .route(
///         "/uploads",
///         post(|| async { "stored" }).layer(LimitLayer::new("uploads", uploads, KeySource::ip())),
///     )
///     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
/// # Ok::<(), limiter_tower::ConfigError>(())
/// ```
///
/// Around a service that is not an axum router (hyper, tonic), the router
/// layer goes outside:
///
/// ```
/// # use std::time::Duration;
/// use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
/// use tower::ServiceBuilder;
///
/// # let service = tower::service_fn(|_: http::Request<String>| async {
/// #     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// # });
/// let policy = Policy::sliding_log([Rule::new(100, Duration::from_secs(60))?])?;
/// let service = ServiceBuilder::new()
///     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())))
///     .layer(LimitLayer::new("api", policy, KeySource::header("x-api-key".parse()?)))
///     .service(service);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct LimitLayer {
    pub(crate) limit: Arc<RouteLimit>,
}

impl LimitLayer {
    /// A limit named `name` (the last part of its keys, escaped like an
    /// identity) applying `policy` per `source`.
    pub fn new(name: impl AsRef<str>, policy: Policy, source: KeySource) -> Self {
        Self {
            limit: Arc::new(RouteLimit::new(name.as_ref(), policy, source)),
        }
    }

    /// The limit's own policy (a request's plan may apply another).
    pub fn policy(&self) -> &Policy {
        self.limit.policy()
    }

    fn limit(&mut self) -> &mut RouteLimit {
        Arc::make_mut(&mut self.limit)
    }

    /// The body of this route's 429 (`text/plain`) instead of the
    /// problem+json body; for gRPC, the `grpc-message`.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.limit().message = Some(message.into().into_boxed_str());
        self
    }

    /// Whether blocks deny this limit's requests (on by default: a blocked
    /// identity or client address gets the block's 429 before the check).
    /// Off for a limit that must keep answering a blocked client by its
    /// own rule, such as a throttle in front of the admin routes, so that
    /// an operator who blocks their own address (or the proxy's) is not
    /// locked out of unblocking it.
    pub fn honours_blocks(mut self, on: bool) -> Self {
        self.limit().named.honours_blocks = on;
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

    /// The router layer whose store and settings (key prefix, client
    /// address, user, headers, failure policy, allow and deny lists) this
    /// limit uses itself, instead of finding a [`LimiterLayer`] above it:
    /// the limit then works alone, on a route or around any service, as a
    /// layer of its own. Limits given the same `LimiterLayer` share its
    /// store, and its [`control`](LimiterLayer::control) reaches them.
    /// The settings are taken as they are now: configure the router layer
    /// first (a setter called on it afterwards changes its own copy only).
    ///
    /// ```
    /// use axum::{Router, routing::get};
    /// use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rate};
    ///
    /// let settings = LimiterLayer::new(Limiter::new(MemoryStore::new())).rate_limit_headers(false);
    /// let feed = Policy::gcra(Rate::per_minute(100)?, 20)?;
    /// let app: Router = Router::new().route(
    ///     "/feed",
    ///     get(|| async { "posts" })
    ///         .layer(LimitLayer::new("feed", feed, KeySource::ip()).router_layer(&settings)),
    /// );
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    pub fn router_layer(mut self, layer: &LimiterLayer) -> Self {
        self.limit().context = Some(Arc::clone(layer.shared()));
        self
    }

    /// The key prefix for this route instead of the router layer's.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        let mut start = prefix.into();
        start.push(':');
        self.limit().key_start = Some(start.into_boxed_str());
        self
    }
}

common_setters! {
    LimitLayer, "this limit";

    fn on_store_error;

    fn allow_ips;

    fn allow_identities;

    fn deny_ips;

    fn deny_identities;

    fn shadow;

    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{KeySource, LimitLayer, MaxWait, Policy, Rule};
    ///
    /// let replies = Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?;
    /// let layer = LimitLayer::new("replies", replies, KeySource::user())
    ///     .wait(MaxWait::new(Duration::from_secs(2))?)
    ///     // Only requests that ask for it: `?wait=1`.
    ///     .wait_when(|parts| parts.uri.query().is_some_and(|q| q.split('&').any(|p| p == "wait=1")));
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    fn wait;
}

impl Configure for LimitLayer {
    fn plain_identities(&self) -> Option<crate::key::Source> {
        Some(self.limit.source.0.clone())
    }

    fn common(&mut self) -> &mut CommonOptions {
        &mut self.limit().options.get_or_insert_default().common
    }

    fn set_on_store_error(&mut self, policy: OnStoreError) {
        self.limit().named.on_store_error = Some(policy);
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Limit::new(inner, Arc::clone(&self.limit))
    }
}

/// The service of [`LimitLayer`](crate::LimitLayer): checks the request's
/// key, then calls `inner` or answers without calling it (so the handler
/// does not run and the body is not read).
///
/// Any request body; any response body, which comes out as axum's
/// [`Body`](axum::body::Body) (moved as it is when it is one already, boxed
/// otherwise), the body of the limiter's own answers too.
#[derive(Debug, Clone)]
pub struct Limit<S> {
    inner: S,
    limit: Arc<RouteLimit>,
}

impl<S> Limit<S> {
    pub(crate) fn new(inner: S, limit: Arc<RouteLimit>) -> Self {
        Self { inner, limit }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Limit<S>
where
    S: Service<Request<ReqBody>, Response = http::Response<ResBody>> + Clone,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        self.limit.call(&mut self.inner, request)
    }
}
