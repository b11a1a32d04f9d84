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
use axum::body::Body;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, Request, StatusCode};
use axum::routing::get;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, MemoryStore, Policy, RATELIMIT, RateLimitLayer, Rule,
};
use tower::ServiceExt as _;

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
        .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new())));

    println!("key-a searches 3 times: 2 pass, the 3rd gets the route's message");
    assert_eq!(
        send(&app, "/search", Some("key-a")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&app, "/search", Some("key-a")).await.status,
        StatusCode::OK
    );
    let denied = send(&app, "/search", Some("key-a")).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The oldest search leaves the 60 s window in just under 60 s.
    assert_eq!(denied.retry_after.as_deref(), Some("60"));
    assert!(denied.rate_limit.contains("\"2-per-60s\";r=0"));
    assert_eq!(denied.body, "Search quota used up: 2 a minute per API key.");

    println!("key-b has its own quota");
    let allowed = send(&app, "/search", Some("key-b")).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("\"2-per-60s\";r=1"));

    println!("without the header there is no quota to count on: 401");
    let anonymous = send(&app, "/search", None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    println!("routes without a LimitLayer are not limited");
    for _ in 0..3 {
        let health = send(&app, "/health", None).await;
        assert_eq!(health.status, StatusCode::OK);
        assert!(health.rate_limit.is_empty());
    }

    println!("ok");
    Ok(())
}

/// The parts of a response this example checks.
struct Answer {
    status: StatusCode,
    rate_limit: String,
    retry_after: Option<String>,
    body: String,
}

/// Sends `GET {path}`, with `api_key` in `x-api-key` when given, and prints the answer.
async fn send(app: &Router, path: &str, api_key: Option<&str>) -> Answer {
    let mut request = Request::get(path);
    if let Some(key) = api_key {
        request = request.header(&API_KEY, key);
    }
    let request = request.body(Body::empty()).expect("a valid request");
    let Ok(response) = app.clone().oneshot(request).await;
    let header = |name: &HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (rate_limit, retry_after) = (header(&RATELIMIT).unwrap_or_default(), header(&RETRY_AFTER));
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .expect("a small body");
    let body = String::from_utf8_lossy(&body).into_owned();
    print!(
        "  GET {path} x-api-key: {} -> {status}",
        api_key.unwrap_or("(none)")
    );
    if !rate_limit.is_empty() {
        print!(" | RateLimit: {rate_limit}");
    }
    if let Some(retry_after) = &retry_after {
        print!(" | Retry-After: {retry_after}");
    }
    if !status.is_success() {
        print!("\n    {body}");
    }
    println!();
    Answer {
        status,
        rate_limit,
        retry_after,
        body,
    }
}
