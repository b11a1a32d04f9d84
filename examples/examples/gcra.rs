//! GCRA behind `#[rate_limit]`: a steady rate with a burst, answering like
//! redis-cell's `CL.THROTTLE` (`gcra(rate = 4/s, burst = 3)` answers as
//! `CL.THROTTLE key 2 4 1`).
//!
//! Run with `cargo run -p limiter-examples --example gcra`.
//!
//! The router runs in process (no socket) on the in-memory store, at 4
//! requests a second so the example ends in under a second. Every outcome is
//! asserted: the example panics if the behaviour changes.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::get;
use limiter_examples::demo::{from_peer, send};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

/// The timeline: one request every 250 ms on average, 3 may pass at once.
#[rate_limit(algorithm = gcra(rate = 4/s, burst = 3), by = ip)]
async fn timeline() -> &'static str {
    "[]"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/timeline", get(timeline))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();
    let request = || from_peer(Method::GET, "/timeline", client);

    println!("4 requests at once: a burst of 3 passes");
    for remaining in ["r=2", "r=1", "r=0"] {
        let answer = send(&app, request()).await;
        assert_eq!(answer.status, StatusCode::OK);
        // Named by its rate and burst; its quota is the burst, over burst ×
        // emission interval (750 ms).
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"4-per-1s-burst-3\";{remaining}"))
        );
        assert_eq!(answer.policy, "\"4-per-1s-burst-3\";q=3;w=1");
    }
    let denied = send(&app, request()).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The next slot is 250 ms away; Retry-After is whole seconds, rounded up.
    assert_eq!(denied.retry_after.as_deref(), Some("1"));
    assert!(denied.rate_limit.contains("r=0"));

    println!("300 ms later one emission interval has passed: one request passes");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let allowed = send(&app, request()).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("r=0"));
    assert_eq!(
        send(&app, request()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );

    println!("ok");
}
