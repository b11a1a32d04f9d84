//! Blocks in process: each kind covers what it names, also on a server
//! that does not give the layer the peer address.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use limiter_tower::{
    Control, Identity, KeySource, LimitLayer, Limiter, MemoryStore, Policy, RateLimitLayer, Rule,
};
use tower::ServiceExt;

fn app() -> (Router, Control) {
    let policy = Policy::sliding_log([Rule::new(100, Duration::from_secs(60)).unwrap()]).unwrap();
    let replies = LimitLayer::new("replies", policy, KeySource::user());
    let layer = RateLimitLayer::new(Limiter::new(MemoryStore::new()))
        .user(|parts| Some(parts.headers.get("x-user-id")?.to_str().ok()?.to_owned()));
    let control = layer.control().limit("POST /replies", &replies);
    let router = Router::new()
        .route("/replies", post(|| async { "sent" }).layer(replies))
        .layer(layer);
    (router, control)
}

async fn reply(router: &Router, user: &str, peer: Option<&str>) -> StatusCode {
    let mut request = Request::post("/replies")
        .header("x-user-id", user)
        .body(Body::empty())
        .unwrap();
    if let Some(peer) = peer {
        let peer: SocketAddr = format!("{peer}:4000").parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(peer));
    }
    router.clone().oneshot(request).await.unwrap().status()
}

/// A user's block holds while an address is blocked too, whether or not
/// the server gives the layer the peer address (a route by user needs
/// none).
#[tokio::test]
async fn a_users_block_holds_beside_address_blocks_without_the_peer_address() {
    let (router, control) = app();
    let minute = Duration::from_secs(60);
    control
        .block(&Identity::user("mallory"), minute)
        .await
        .unwrap();
    control
        .block(&Identity::ip("203.0.113.9".parse().unwrap()), minute)
        .await
        .unwrap();
    assert_eq!(
        reply(&router, "mallory", None).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(reply(&router, "bob", None).await, StatusCode::OK);
    // With the peer address: the blocked address covers bob's replies.
    let blocked_peer = Some("203.0.113.9");
    assert_eq!(
        reply(&router, "bob", blocked_peer).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        reply(&router, "bob", Some("203.0.113.10")).await,
        StatusCode::OK
    );
    assert_eq!(
        reply(&router, "mallory", Some("203.0.113.10")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The user named like the blocked address is not blocked.
    assert_eq!(reply(&router, "203.0.113.9", None).await, StatusCode::OK);
}
