//! Mistakes in how an application is put together that only a request can
//! reveal, and how they are reported: a 500 whose body names the fix in
//! debug builds (so a developer sees it without a tracing subscriber), and
//! an `error` event naming it in every build.
//!
//! Why a request: axum boxes a route before the router's layers wrap it,
//! and a handler has no hook when its route is built, so the router layer
//! cannot see which limits lie below it; whether a request carries its peer
//! address depends on how the app is served.

use axum::response::Response;
use http::StatusCode;

use crate::response::{Protocol, problem};
use crate::scope;

/// What a limit found missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// No [`LimiterLayer`](crate::LimiterLayer) is calling the route.
    RouterLayer,
    /// `by = ip`, and the request carries no `ConnectInfo<SocketAddr>`.
    PeerAddress,
    /// `by = user`, and the router layer has no user resolver.
    UserResolver,
}

impl Missing {
    /// What is wrong with the limit `limit`, and how to fix it.
    pub(crate) fn explain(self, limit: &str) -> String {
        match self {
            Self::RouterLayer if scope::layer_exists() => format!(
                "the rate limit `{limit}` found no LimiterLayer above its route, though the \
                 application has one: axum's `Router::layer` covers only the routes added \
                 before it, so add this route before `.layer(LimiterLayer::new(..))`. \
                 (If it is added before, a layer in between runs it on a task of its own: \
                 put a LimiterLayer below that layer.)"
            ),
            Self::RouterLayer => format!(
                "the rate limit `{limit}` found no LimiterLayer above its route: add \
                 `.layer(LimiterLayer::new(limiter))` to the Router after its last route \
                 (or around the service, outside the LimitLayer)."
            ),
            Self::PeerAddress => format!(
                "the rate limit `{limit}` counts by client IP, but the request carries no \
                 peer address: serve the app with \
                 `into_make_service_with_connect_info::<SocketAddr>()` (axum), or insert \
                 `axum::extract::ConnectInfo<SocketAddr>` into the request's extensions \
                 (hyper, tonic)."
            ),
            Self::UserResolver => format!(
                "the rate limit `{limit}` counts by user, but the LimiterLayer above it \
                 has no user resolver: set one with `LimiterLayer::user(..)`."
            ),
        }
    }

    /// The answer to a request that revealed this mistake, logged.
    pub(crate) fn response(self, limit: &str, protocol: Protocol) -> Response {
        let why = self.explain(limit);
        tracing::error!(limit, "rate limiting is misconfigured: {why}");
        let detail = if cfg!(debug_assertions) {
            format!("Rate limiting is misconfigured on this server: {why}")
        } else {
            "Rate limiting is misconfigured on this server.".to_owned()
        };
        problem(protocol, StatusCode::INTERNAL_SERVER_ERROR, &detail)
    }
}
