//! The sliding window counter behind `#[rate_limit]`: windows aligned to
//! multiples of W, the previous window's count weighted by its overlap with
//! the last W (O(1) state, an approximation for large limits).
//!
//! Run with `cargo run -p limiter-examples --example sliding_window`.
//!
//! The router runs in process (no socket) on the in-memory store, with a
//! 400 ms window so the example ends in about a second. Every outcome is
//! asserted: the example panics if the behaviour changes.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::get;
use limiter_examples::demo::{from_peer, send};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

/// The window of the limit below.
const WINDOW: Duration = Duration::from_millis(400);

/// The feed: 4 per 400 ms per client IP, as a sliding window counter.
#[rate_limit(algorithm = sliding_window, rules = [(4, 400ms)], by = ip)]
async fn feed() -> &'static str {
    "[]"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/feed", get(feed))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();
    let request = || from_peer(Method::GET, "/feed", client);

    // Windows are aligned to multiples of 400 ms of the memory store's clock
    // (the system clock): start 20 ms into one so the timeline is known.
    tokio::time::sleep(until_into_next_window(Duration::from_millis(20))).await;
    println!("20 ms into a window: 4 requests pass, the 5th does not");
    for remaining in ["r=3", "r=2", "r=1", "r=0"] {
        let answer = send(&app, request()).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"4-per-400ms\";{remaining}"))
        );
    }
    let denied = send(&app, request()).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.retry_after.as_deref(), Some("1"));

    // 220 ms into the next window, the previous one still covers 180 of the
    // last 400 ms: its 4 requests count as 4 × 180/400 = 1.8, so 2 more pass
    // (1.8 + 2 <= 4), not 4 as a fixed window would allow.
    tokio::time::sleep(until_into_next_window(Duration::from_millis(220))).await;
    println!("220 ms into the next window: the previous counts as 1.8, so only 2 pass");
    for _ in 0..2 {
        assert_eq!(send(&app, request()).await.status, StatusCode::OK);
    }
    let denied = send(&app, request()).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.rate_limit.contains("\"4-per-400ms\";r=0"));

    println!("ok");
}

/// How long until `offset` into the next window of [`WINDOW`] on the system clock.
fn until_into_next_window(offset: Duration) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_micros();
    let window = WINDOW.as_micros();
    let next = now - now % window + window;
    Duration::from_micros((next - now) as u64) + offset
}
