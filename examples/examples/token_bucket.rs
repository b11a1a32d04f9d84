//! The token bucket behind `#[rate_limit]`: a burst up to the capacity, then
//! tokens come back at the rate; a request may cost several tokens (`cost`).
//!
//! Run with `cargo run -p limiter-examples --example token_bucket`.
//!
//! The router runs in process (no socket) on the in-memory store, refilling
//! 4 tokens a second so the example ends in under a second. Every outcome is
//! asserted: the example panics if the behaviour changes.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use limiter_examples::demo::{from_peer, send};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

/// Likes: 3 at once per client IP, then one every 250 ms.
#[rate_limit(algorithm = token_bucket(rate = 4/s, burst = 3), by = ip)]
async fn like() -> &'static str {
    "liked"
}

/// Bulk likes: the same bucket size, but each request takes 2 tokens.
#[rate_limit(algorithm = token_bucket(rate = 4/s, burst = 3), by = ip, cost = 2)]
async fn bulk_like() -> &'static str {
    "liked them all"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/likes", post(like))
        .route("/bulk-likes", post(bulk_like))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();
    let like_request = || from_peer(Method::POST, "/likes", client);
    let bulk_like_request = || from_peer(Method::POST, "/bulk-likes", client);

    println!("4 likes at once: the bucket holds 3 tokens");
    for remaining in ["r=2", "r=1", "r=0"] {
        let answer = send(&app, like_request()).await;
        assert_eq!(answer.status, StatusCode::OK);
        // Named by its rate and burst; its quota is the burst, refilled in 750 ms.
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"4-per-1s-burst-3\";{remaining}"))
        );
        assert_eq!(answer.policy, "\"4-per-1s-burst-3\";q=3;w=1");
    }
    let denied = send(&app, like_request()).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The next token is 250 ms away; Retry-After is whole seconds, rounded up.
    assert_eq!(denied.retry_after.as_deref(), Some("1"));

    println!("300 ms later 1.2 tokens are back: one like passes, the next does not");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(send(&app, like_request()).await.status, StatusCode::OK);
    assert_eq!(
        send(&app, like_request()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );

    println!("cost = 2: a full bucket of 3 pays for one bulk like, not two");
    let allowed = send(&app, bulk_like_request()).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("r=1"));
    let denied = send(&app, bulk_like_request()).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.rate_limit.contains("r=1"));

    println!("ok");
}
