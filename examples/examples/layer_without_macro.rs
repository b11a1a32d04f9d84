//! `LimitLayer`: the limit `#[rate_limit]` generates, built by hand for any
//! route or service, here counting by an API key header.
//!
//! Run with `cargo run -p limiter-examples --example layer_without_macro`.
//!
//! The router runs in process (no socket) on the in-memory store; nothing
//! waits, so the example ends at once. Every outcome is asserted: the example
//! panics if the behaviour changes.

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, Method, StatusCode};
use axum::routing::get;
use limiter_examples::demo::{request, send, with_header};
use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};

/// The header that carries the client's API key.
static API_KEY: HeaderName = HeaderName::from_static("x-api-key");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 2 searches a minute per API key, keyed `rate_limit:{api key}:search`.
    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60))?])?;
    let limit = LimitLayer::new("search", policy, KeySource::header(API_KEY.clone()))
        .message("Search quota used up: 2 a minute per API key.");
    let app = Router::new()
        .route("/search", get(|| async { "results" }).layer(limit))
        .route("/health", get(|| async { "ok" }))
        // The store comes from the router-level layer, as for `#[rate_limit]`.
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let search = |api_key| with_header(request(Method::GET, "/search"), API_KEY.clone(), api_key);

    println!("key-a searches 3 times: 2 pass, the 3rd gets the route's message");
    assert_eq!(send(&app, search("key-a")).await.status, StatusCode::OK);
    assert_eq!(send(&app, search("key-a")).await.status, StatusCode::OK);
    let denied = send(&app, search("key-a")).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The oldest search leaves the 60 s window in just under 60 s.
    assert_eq!(denied.retry_after.as_deref(), Some("60"));
    assert!(denied.rate_limit.contains("\"2-per-60s\";r=0"));
    assert_eq!(denied.body, "Search quota used up: 2 a minute per API key.");

    println!("key-b has its own quota");
    let allowed = send(&app, search("key-b")).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("\"2-per-60s\";r=1"));

    println!("without the header there is no quota to count on: 401");
    let anonymous = send(&app, request(Method::GET, "/search")).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    println!("routes without a LimitLayer are not limited");
    for _ in 0..3 {
        let health = send(&app, request(Method::GET, "/health")).await;
        assert_eq!(health.status, StatusCode::OK);
        assert!(health.rate_limit.is_empty());
    }

    println!("ok");
    Ok(())
}
