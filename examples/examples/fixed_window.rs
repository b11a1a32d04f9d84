//! The fixed window behind `#[rate_limit]`: at most N requests per window,
//! the window starting at the client's first request.
//!
//! Run with `cargo run -p limiter-examples --example fixed_window`.
//!
//! The router runs in process (no socket) on the in-memory store, with a
//! 300 ms window so the example ends in under a second. Every outcome is
//! asserted: the example panics if the behaviour changes.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use limiter_examples::demo::{from_peer, send};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

/// Logins: 3 per 300 ms window per client IP.
#[rate_limit(algorithm = fixed_window, rules = [(3, 300ms)], by = ip)]
async fn login() -> &'static str {
    "welcome"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/login", post(login))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();
    let request = || from_peer(Method::POST, "/login", client);

    println!("4 logins at once: the window (opened by the first) holds 3");
    for remaining in ["r=2", "r=1", "r=0"] {
        let answer = send(&app, request()).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"3-per-300ms\";{remaining}"))
        );
    }
    let denied = send(&app, request()).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The window ends within 300 ms; Retry-After is whole seconds, rounded up.
    assert_eq!(denied.retry_after.as_deref(), Some("1"));
    assert!(denied.rate_limit.contains("\"3-per-300ms\";r=0"));

    println!("350 ms later the window is over: the next login opens a new one");
    tokio::time::sleep(Duration::from_millis(350)).await;
    let allowed = send(&app, request()).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("\"3-per-300ms\";r=2"));

    println!("ok");
}
