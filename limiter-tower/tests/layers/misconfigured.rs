//! Mistakes in putting an application together, each answered with a 500
//! whose body (in debug builds) names the fix: a route added after the
//! router layer, serving without the peer address, `by = user` without a
//! user resolver; over gRPC too.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::routing::get;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule, rate_limit,
};
use tower::ServiceExt;

fn once_a_minute(name: &str, source: KeySource) -> LimitLayer {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    LimitLayer::new(name, policy, source)
}

fn layer() -> LimiterLayer {
    LimiterLayer::new(Limiter::new(MemoryStore::new()))
}

async fn get_path(router: &Router, path: &str) -> Response {
    let request = Request::get(path).body(Body::empty()).unwrap();
    router.clone().oneshot(request).await.unwrap()
}

/// The 500's body, checked to name `fix` in debug builds.
async fn assert_names_the_fix(response: Response, fix: &str) -> String {
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let body = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap();
    let body = String::from_utf8(body.to_vec()).unwrap();
    if cfg!(debug_assertions) {
        assert!(body.contains(fix), "{body}");
    } else {
        assert!(body.contains("Rate limiting is misconfigured on this server."));
    }
    body
}

/// Counted once a minute for everyone.
#[rate_limit(rules = [(1, 60s)], by = global)]
async fn late_handler() -> &'static str {
    "never"
}

#[tokio::test]
async fn a_route_added_after_the_router_layer_is_told_so() {
    let router = Router::new()
        .route(
            "/before",
            get(|| async { "ok" }).layer(once_a_minute("before", KeySource::global())),
        )
        .layer(layer())
        .route(
            "/after",
            get(|| async { "never" }).layer(once_a_minute("after", KeySource::global())),
        )
        .route("/after-macro", get(late_handler));
    // Asked first: axum applies a router layer to handler routes only when
    // they are first served, and the message must not depend on that.
    for (path, limit) in [
        ("/after", "after"),
        ("/after-macro", "misconfigured-late_handler"),
    ] {
        let body = assert_names_the_fix(
            get_path(&router, path).await,
            &format!(
                "the rate limit `{limit}` found no LimiterLayer above its route, though the \
                 application has one: axum's `Router::layer` covers only the routes added \
                 before it, so add this route before `.layer(LimiterLayer::new(..))`."
            ),
        )
        .await;
        // Not told to add the layer it has.
        assert!(
            !body.contains("to the Router after its last route"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn by_ip_served_without_the_peer_address_names_connect_info() {
    let router = Router::new()
        .route(
            "/posts",
            get(|| async { "never" }).layer(once_a_minute("posts", KeySource::ip())),
        )
        .layer(layer());
    // No `ConnectInfo` in the request: served with `into_make_service`.
    assert_names_the_fix(
        get_path(&router, "/posts").await,
        "the rate limit `posts` counts by client IP, but the request carries no peer address: \
         serve the app with `into_make_service_with_connect_info::<SocketAddr>()` (axum), or \
         insert `axum::extract::ConnectInfo<SocketAddr>` into the request's extensions",
    )
    .await;
}

#[tokio::test]
async fn by_user_without_a_resolver_names_the_setter() {
    let router = Router::new()
        .route(
            "/replies",
            get(|| async { "never" }).layer(once_a_minute("replies", KeySource::user())),
        )
        .layer(layer());
    assert_names_the_fix(
        get_path(&router, "/replies").await,
        "the rate limit `replies` counts by user, but the LimiterLayer above it has no user \
         resolver: set one with `LimiterLayer::user(..)`.",
    )
    .await;
}

#[tokio::test]
async fn a_grpc_call_gets_the_fix_as_an_internal_status() {
    let router = Router::new()
        .route(
            "/grpc.health.v1.Health/Check",
            get(|| async { "never" }).layer(once_a_minute("health", KeySource::user())),
        )
        .layer(layer());
    let request = Request::get("/grpc.health.v1.Health/Check")
        .header("content-type", "application/grpc")
        .body(Body::empty())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "13");
    let message = response.headers()["grpc-message"].to_str().unwrap();
    let message = percent_decode(message);
    if cfg!(debug_assertions) {
        assert!(
            message.contains("set one with `LimiterLayer::user(..)`"),
            "{message}"
        );
    } else {
        assert_eq!(message, "Rate limiting is misconfigured on this server.");
    }
}

fn percent_decode(text: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = [bytes.next().unwrap(), bytes.next().unwrap()]
                .iter()
                .map(|&b| b as char)
                .collect();
            out.push(u8::from_str_radix(&hex, 16).unwrap());
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).unwrap()
}
