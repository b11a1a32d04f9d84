//! The sliding log, the default algorithm of `#[rate_limit]`: several rules
//! checked at once per client IP, and `prevent_duplicate`.
//!
//! Run with `cargo run -p limiter-examples --example sliding_log`.
//!
//! The router runs in process (no socket) on the in-memory store, with
//! windows of milliseconds so the example ends in about a second. Every
//! outcome is asserted: the example panics if the behaviour changes.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use limiter_examples::demo::{from_peer, send};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

/// Posts: at most 2 per 500 ms and 3 per 1.5 s per client IP.
#[rate_limit(rules = [(2, 500ms), (3, 1500ms)], by = ip)]
async fn create_post() -> &'static str {
    "created"
}

/// Replies: 10 a minute, and never twice within 200 ms.
#[rate_limit(rules = [(10, 60s)], by = ip, prevent_duplicate = 200ms)]
async fn create_reply() -> &'static str {
    "replied"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/posts", post(create_post))
        .route("/replies", post(create_reply))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let alice: SocketAddr = ([203, 0, 113, 7], 50_000).into();
    let bob: SocketAddr = ([198, 51, 100, 2], 50_000).into();
    let post_from = |peer| from_peer(Method::POST, "/posts", peer);
    let reply_from = |peer| from_peer(Method::POST, "/replies", peer);

    println!("alice posts 3 times at once: the rule 2-per-500ms stops the third");
    for expected_remaining in ["r=1", "r=0"] {
        let answer = send(&app, post_from(alice)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"2-per-500ms\";{expected_remaining}"))
        );
    }
    let denied = send(&app, post_from(alice)).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The wait is under a second; Retry-After is whole seconds, rounded up.
    assert_eq!(denied.retry_after.as_deref(), Some("1"));
    assert!(denied.rate_limit.contains("\"2-per-500ms\";r=0"));
    assert!(denied.rate_limit.contains("\"3-per-1500ms\";r=1"));
    assert!(
        denied
            .body
            .contains("\"violated-policies\":[\"2-per-500ms\"]")
    );

    println!("bob has his own quota");
    assert_eq!(send(&app, post_from(bob)).await.status, StatusCode::OK);

    println!("600 ms later the 500 ms window is clear, but 3-per-1500ms allows one more only");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let allowed = send(&app, post_from(alice)).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("\"3-per-1500ms\";r=0"));
    let denied = send(&app, post_from(alice)).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.rate_limit.contains("\"2-per-500ms\";r=1"));
    assert!(
        denied
            .body
            .contains("\"violated-policies\":[\"3-per-1500ms\"]")
    );

    println!("prevent_duplicate = 200ms: the same reply twice in a row is refused");
    let first = send(&app, reply_from(alice)).await;
    assert_eq!(first.status, StatusCode::OK);
    let duplicate = send(&app, reply_from(alice)).await;
    assert_eq!(duplicate.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(duplicate.rate_limit.contains("\"1-per-200ms\";r=0"));
    assert!(duplicate.rate_limit.contains("\"10-per-60s\";r=9"));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(send(&app, reply_from(alice)).await.status, StatusCode::OK);

    println!("ok");
}
