//! A request's peer address, as a server hands it to the router.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use http::Request;

/// `request` as a server serving the router with its peer addresses
/// (`into_make_service_with_connect_info::<SocketAddr>()`) hands it on:
/// from `peer`. For tests that send requests with `oneshot` to routes
/// limited `by = ip`, which answer 500 without a peer address.
///
/// ```
/// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::post};
/// use limiter_tower::{Limiter, LimiterLayer, MemoryStore, from_peer, rate_limit};
/// use tower::ServiceExt as _;
///
/// #[rate_limit(rules = [(1, 60s)], by = ip)]
/// async fn create_post() -> &'static str {
///     "created"
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let app = Router::new()
///     .route("/posts", post(create_post))
///     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
/// let from = |peer: &str| from_peer(Request::post("/posts").body(Body::empty()).unwrap(), peer.parse().unwrap());
/// assert_eq!(app.clone().oneshot(from("203.0.113.7:5000")).await?.status(), StatusCode::OK);
/// assert_eq!(app.clone().oneshot(from("203.0.113.7:5001")).await?.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(app.clone().oneshot(from("198.51.100.1:5000")).await?.status(), StatusCode::OK);
/// # Ok::<(), std::convert::Infallible>(())
/// # }).unwrap();
/// ```
pub fn from_peer<B>(mut request: Request<B>, peer: SocketAddr) -> Request<B> {
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}
