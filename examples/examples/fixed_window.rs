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
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, Request, StatusCode};
use axum::routing::post;
use limiter_tower::{Limiter, MemoryStore, RATELIMIT, RateLimitLayer, rate_limit};
use tower::ServiceExt as _;

/// Logins: 3 per 300 ms window per client IP.
#[rate_limit(algorithm = fixed_window, rules = [(3, 300ms)], by = ip)]
async fn login() -> &'static str {
    "welcome"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/login", post(login))
        .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new())));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();

    println!("4 logins at once: the window (opened by the first) holds 3");
    for remaining in ["r=2", "r=1", "r=0"] {
        let answer = send(&app, "/login", client).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"3-per-300ms\";{remaining}"))
        );
    }
    let denied = send(&app, "/login", client).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The window ends within 300 ms; Retry-After is whole seconds, rounded up.
    assert_eq!(denied.retry_after.as_deref(), Some("1"));
    assert!(denied.rate_limit.contains("\"3-per-300ms\";r=0"));

    println!("350 ms later the window is over: the next login opens a new one");
    tokio::time::sleep(Duration::from_millis(350)).await;
    let allowed = send(&app, "/login", client).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("\"3-per-300ms\";r=2"));

    println!("ok");
}

/// The parts of a response this example checks.
struct Answer {
    status: StatusCode,
    rate_limit: String,
    retry_after: Option<String>,
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
    let answer = Answer {
        status: response.status(),
        rate_limit: header(&RATELIMIT).unwrap_or_default(),
        retry_after: header(&RETRY_AFTER),
    };
    print!(
        "  POST {path} from {} -> {} | RateLimit: {}",
        peer.ip(),
        answer.status,
        answer.rate_limit
    );
    if let Some(retry_after) = &answer.retry_after {
        print!(" | Retry-After: {retry_after}");
    }
    println!();
    answer
}
