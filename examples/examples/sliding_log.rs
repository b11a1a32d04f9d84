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
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, Request, StatusCode};
use axum::routing::post;
use limiter_tower::{Limiter, MemoryStore, RATELIMIT, RateLimitLayer, rate_limit};
use tower::ServiceExt as _;

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
        .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new())));
    let alice: SocketAddr = ([203, 0, 113, 7], 50_000).into();
    let bob: SocketAddr = ([198, 51, 100, 2], 50_000).into();

    println!("alice posts 3 times at once: the rule 2-per-500ms stops the third");
    for expected_remaining in ["r=1", "r=0"] {
        let answer = send(&app, "/posts", alice).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"2-per-500ms\";{expected_remaining}"))
        );
    }
    let denied = send(&app, "/posts", alice).await;
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
    assert_eq!(send(&app, "/posts", bob).await.status, StatusCode::OK);

    println!("600 ms later the 500 ms window is clear, but 3-per-1500ms allows one more only");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let allowed = send(&app, "/posts", alice).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("\"3-per-1500ms\";r=0"));
    let denied = send(&app, "/posts", alice).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.rate_limit.contains("\"2-per-500ms\";r=1"));
    assert!(
        denied
            .body
            .contains("\"violated-policies\":[\"3-per-1500ms\"]")
    );

    println!("prevent_duplicate = 200ms: the same reply twice in a row is refused");
    let first = send(&app, "/replies", alice).await;
    assert_eq!(first.status, StatusCode::OK);
    let duplicate = send(&app, "/replies", alice).await;
    assert_eq!(duplicate.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(duplicate.rate_limit.contains("\"1-per-200ms\";r=0"));
    assert!(duplicate.rate_limit.contains("\"10-per-60s\";r=9"));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(send(&app, "/replies", alice).await.status, StatusCode::OK);

    println!("ok");
}

/// The parts of a response this example checks.
struct Answer {
    status: StatusCode,
    rate_limit: String,
    retry_after: Option<String>,
    body: String,
}

/// Sends `POST {path}` from `peer` (the `ConnectInfo` that `axum::serve`
/// with connect info would add, for `by = ip`) and prints the answer.
async fn send(app: &Router, path: &str, peer: SocketAddr) -> Answer {
    let mut request = Request::post(path)
        .body(Body::empty())
        .expect("a valid request");
    request.extensions_mut().insert(ConnectInfo(peer));
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
        "  POST {path} from {} -> {status} | RateLimit: {rate_limit}",
        peer.ip()
    );
    if let Some(retry_after) = &retry_after {
        print!(" | Retry-After: {retry_after}\n    {body}");
    }
    println!();
    Answer {
        status,
        rate_limit,
        retry_after,
        body,
    }
}
