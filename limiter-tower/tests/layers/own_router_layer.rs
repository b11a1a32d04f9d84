//! A `LimitLayer` given a router layer's settings (`router_layer`): alone
//! on its route, with no `LimiterLayer` around it, it limits as it would
//! below one, with that layer's store, prefix and headers.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::routing::get;
use limiter_tower::{
    Control, Identity, KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore,
    Policy, Rate,
};
use tower::ServiceExt;

fn clock() -> ManualClock {
    ManualClock::new(Duration::from_secs(1_750_000_000))
}

/// Two requests at once, then one a minute.
fn feed_policy() -> Policy {
    Policy::gcra(Rate::per_minute(1).unwrap(), 2).unwrap()
}

async fn send(router: &Router, path: &str, from: &str) -> Response {
    let mut request = Request::get(path).body(Body::empty()).unwrap();
    let peer: SocketAddr = format!("{from}:5000").parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    router.clone().oneshot(request).await.unwrap()
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response.headers()[name].to_str().unwrap()
}

#[tokio::test]
async fn a_limit_with_its_own_router_layer_limits_without_one_around_it() {
    let clock = clock();
    let settings = LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock.clone())));
    let feed = LimitLayer::new("feed", feed_policy(), KeySource::ip()).router_layer(&settings);
    let router = Router::new().route("/feed", get(|| async { "posts" }).layer(feed));

    for remaining in [1, 0] {
        let ok = send(&router, "/feed", "203.0.113.7").await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(
            header(&ok, "ratelimit"),
            format!("\"1-per-60s-burst-2\";r={remaining};t=60")
        );
    }
    let denied = send(&router, "/feed", "203.0.113.7").await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&denied, "retry-after"), "60");
    // Another client has its own key.
    let other = send(&router, "/feed", "198.51.100.1").await;
    assert_eq!(other.status(), StatusCode::OK);
    clock.advance(Duration::from_secs(60));
    let again = send(&router, "/feed", "203.0.113.7").await;
    assert_eq!(again.status(), StatusCode::OK);
}

#[tokio::test]
async fn limits_given_one_router_layer_share_its_store_and_settings() {
    let settings =
        LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock()))).rate_limit_headers(false);
    let feed = LimitLayer::new("feed", feed_policy(), KeySource::ip()).router_layer(&settings);
    let router = Router::new()
        .route("/feed", get(|| async { "posts" }).layer(feed.clone()))
        .route(
            "/feed/latest",
            get(|| async { "latest" }).layer(feed.clone()),
        );

    // One limit on two routes: one key, one count.
    let first = send(&router, "/feed", "203.0.113.7").await;
    assert_eq!(first.status(), StatusCode::OK);
    assert!(first.headers().get("ratelimit").is_none());
    let second = send(&router, "/feed/latest", "203.0.113.7").await;
    assert_eq!(second.status(), StatusCode::OK);
    let denied = send(&router, "/feed", "203.0.113.7").await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // Denials carry the fields whatever the setting.
    assert_eq!(
        header(&denied, "ratelimit"),
        "\"1-per-60s-burst-2\";r=0;t=60"
    );

    // The router layer's control reaches the limit's state in its store.
    let control = settings.control().limit("/feed", &feed);
    let client = Identity::ip("203.0.113.7".parse().unwrap());
    assert_eq!(control.reset(&client).await.unwrap(), 1);
    let after_reset = send(&router, "/feed", "203.0.113.7").await;
    assert_eq!(after_reset.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_limit_with_its_own_router_layer_ignores_the_one_around_it() {
    let own = LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock())));
    let around =
        LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock()))).rate_limit_headers(false);
    let feed = LimitLayer::new("feed", feed_policy(), KeySource::ip()).router_layer(&own);
    let router = Router::new()
        .route("/feed", get(|| async { "posts" }).layer(feed.clone()))
        .layer(around.clone());

    let ok = send(&router, "/feed", "203.0.113.7").await;
    assert_eq!(ok.status(), StatusCode::OK);
    // The own layer's setting: the fields on allowed responses.
    assert_eq!(header(&ok, "ratelimit"), "\"1-per-60s-burst-2\";r=1;t=60");
    // The request counted in the own layer's store, not in the one around.
    assert_eq!(remaining(own.control().limit("/feed", &feed)).await, [1]);
    assert_eq!(remaining(around.control().limit("/feed", &feed)).await, [2]);
}

/// The quota left to 203.0.113.7 in each limit `control` reaches.
async fn remaining(control: Control) -> Vec<u64> {
    let client = Identity::ip("203.0.113.7".parse().unwrap());
    let states = control.limits(&client).await.unwrap();
    states.iter().map(|state| state.remaining).collect()
}
