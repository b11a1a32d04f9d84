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
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderName, Request, StatusCode};
use axum::routing::get;
use limiter_tower::{
    Limiter, MemoryStore, RATELIMIT, RATELIMIT_POLICY, RateLimitLayer, rate_limit,
};
use tower::ServiceExt as _;

/// The timeline: one request every 250 ms on average, 3 may pass at once.
#[rate_limit(algorithm = gcra(rate = 4/s, burst = 3), by = ip)]
async fn timeline() -> &'static str {
    "[]"
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = Router::new()
        .route("/timeline", get(timeline))
        .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new())));
    let client: SocketAddr = ([203, 0, 113, 7], 50_000).into();

    println!("4 requests at once: a burst of 3 passes");
    for remaining in ["r=2", "r=1", "r=0"] {
        let answer = send(&app, "/timeline", client).await;
        assert_eq!(answer.status, StatusCode::OK);
        // GCRA's quota reads "burst per burst × emission interval": 3 per 750 ms.
        assert!(
            answer
                .rate_limit
                .contains(&format!("\"3-per-750ms\";{remaining}"))
        );
        assert_eq!(answer.policy, "\"3-per-750ms\";q=3;w=1");
    }
    let denied = send(&app, "/timeline", client).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    // The next slot is 250 ms away; Retry-After is whole seconds, rounded up.
    assert_eq!(denied.retry_after.as_deref(), Some("1"));
    assert!(denied.rate_limit.contains("r=0"));

    println!("300 ms later one emission interval has passed: one request passes");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let allowed = send(&app, "/timeline", client).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert!(allowed.rate_limit.contains("r=0"));
    assert_eq!(
        send(&app, "/timeline", client).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );

    println!("ok");
}

/// The parts of a response this example checks.
struct Answer {
    status: StatusCode,
    policy: String,
    rate_limit: String,
    retry_after: Option<String>,
}

/// Sends `GET {path}` from `peer` (the `ConnectInfo` that `axum::serve`
/// with connect info would add, for `by = ip`) and prints the answer.
async fn send(app: &Router, path: &str, peer: SocketAddr) -> Answer {
    let mut request = Request::get(path)
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
        policy: header(&RATELIMIT_POLICY).unwrap_or_default(),
        rate_limit: header(&RATELIMIT).unwrap_or_default(),
        retry_after: header(&RETRY_AFTER),
    };
    print!(
        "  GET {path} from {} -> {} | RateLimit: {}",
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
