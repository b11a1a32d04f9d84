//! A limit in a process where no `LimiterLayer` wraps anything: the 500
//! says which layer to add. Alone in its test binary, since the message
//! depends on whether the process has a router layer anywhere.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use limiter_tower::{KeySource, LimitLayer, Policy, Rule};
use tower::ServiceExt;

#[tokio::test]
async fn a_limit_without_a_router_layer_names_the_layer_to_add() {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    let router = Router::new().route(
        "/posts",
        get(|| async { "never" }).layer(LimitLayer::new("posts", policy, KeySource::global())),
    );
    let request = Request::get("/posts").body(Body::empty()).unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap();
    let body = std::str::from_utf8(&body).unwrap();
    if cfg!(debug_assertions) {
        assert!(
            body.contains(
                "the rate limit `posts` found no LimiterLayer above its route: \
                 add `.layer(LimiterLayer::new(limiter))` to the Router after its last route"
            ),
            "{body}"
        );
    } else {
        assert!(body.contains("Rate limiting is misconfigured on this server."));
    }
}
