//! What `#[rate_limit]` expands to calls. Not a public API: it may change in
//! any release.
//!
//! The generated code builds each handler's policy with limiter-core's own
//! constructors, the calls the macro made with the same values when it
//! expanded, and builds its [`LimitLayer`] once, on the first request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

pub use axum;
pub use http;
pub use limiter_core::{
    ConcurrencyLimit, ConfigError, DEFAULT_DUPLICATE_WINDOW, DEFAULT_LEASE_TTL, Lease, MaxWait,
    OnStoreError, Plan, Policy, Rate, Rule,
};
#[cfg(feature = "macros")]
pub use limiter_macros::__handler_items as handler_items;

pub use crate::key::KeySource;
pub use crate::limit::LimitLayer;
pub use limiter_core::Penalty;

use axum::body::Body;
use axum::extract::Request;
use axum::handler::{Handler, HandlerService};
use axum::response::Response;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::limit::ResponseFuture;

/// `{module}-{handler}`, the last part of the handler's keys: the last
/// segment of the module path names the handler's group, as a class name
/// would.
pub fn limit_name(module_path: &str, handler: &str) -> String {
    let module = module_path.rsplit("::").next().unwrap_or(module_path);
    format!("{module}-{handler}")
}

/// The policy (or concurrency limit, or bound on waiting) the macro built
/// with these same calls and values while it expanded.
///
/// # Panics
///
/// Never from `#[rate_limit]`: the macro refuses to compile any value
/// these calls refuse.
pub fn proven<T>(value: Result<T, ConfigError>) -> T {
    value.unwrap_or_else(|error| {
        unreachable!("#[rate_limit] built this value when it compiled: {error}")
    })
}

/// `#[rate_limit(count_failures)]`'s `count_when`: responses of status 400
/// or more count.
pub fn counts_failures(status: http::StatusCode, _headers: &http::HeaderMap) -> bool {
    status.as_u16() >= 400
}

/// A network of an allow or a deny list as `#[rate_limit(allow = [...])]`
/// or `deny = [...]` writes it: in
/// CIDR notation or a single address.
///
/// # Panics
///
/// Never from `#[rate_limit]`: the macro refuses to compile any other text.
pub fn listed_net(text: &str) -> ipnet::IpNet {
    text.parse()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .unwrap_or_else(|_| unreachable!("#[rate_limit] parsed {text:?} when it compiled"))
}

/// Runs `handler` with `state` behind `limit`.
pub fn call<H, T, S>(
    limit: &LimitLayer,
    handler: H,
    request: Request,
    state: S,
) -> HandlerFuture<H, T, S>
where
    H: Handler<T, S>,
    S: Clone + Send + Sync + 'static,
{
    let mut service = limit.layer(handler.with_state(state));
    // A handler service is always ready: `poll_ready` has nothing to wait for.
    HandlerFuture {
        inner: service.call(request),
    }
}

pin_project! {
    /// The future of a `#[rate_limit]` handler: its limit's future over the
    /// handler, named so that it needs no box of its own.
    pub struct HandlerFuture<H, T, S>
    where
        H: Handler<T, S>,
        S: Clone,
        S: Send,
        S: Sync,
        S: 'static,
    {
        #[pin]
        inner: ResponseFuture<HandlerService<H, T, S>, Body>,
    }
}

impl<H, T, S> Future for HandlerFuture<H, T, S>
where
    H: Handler<T, S>,
    S: Clone + Send + Sync + 'static,
{
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        match ready!(self.project().inner.poll(cx)) {
            Ok(response) => Poll::Ready(response),
            Err(never) => match never {},
        }
    }
}

impl<H, T, S> fmt::Debug for HandlerFuture<H, T, S>
where
    H: Handler<T, S>,
    S: Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuture").finish_non_exhaustive()
    }
}
