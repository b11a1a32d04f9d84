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
    Control, Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule,
};
use tower::ServiceExt;

use crate::common::user_of;

fn app() -> (Router, Control) {
    let policy = Policy::sliding_log([Rule::new(100, Duration::from_secs(60)).unwrap()]).unwrap();
    let replies = LimitLayer::new("replies", policy, KeySource::user());
    let layer = LimiterLayer::new(Limiter::new(MemoryStore::new())).user(user_of);
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

/// A handle merged from two layers' (a route with a store of its own
/// inside the app's) blocks in both stores, lists each key once, and
/// lifts both.
#[tokio::test]
async fn a_merged_handle_blocks_in_every_store_and_lists_each_key_once() {
    let policy = Policy::sliding_log([Rule::new(100, Duration::from_secs(60)).unwrap()]).unwrap();
    let search = LimitLayer::new("search", policy, KeySource::user());
    let search_layer = LimiterLayer::new(Limiter::new(MemoryStore::new())).user(user_of);
    let search_control = search_layer.control();
    let (router, control) = app();
    let control = control.merge(search_control.clone().limit("POST /search", &search));
    let searching: axum::routing::MethodRouter = post(|| async { "found" }).layer(search);
    let router: Router =
        router.merge(Router::new().route("/search", searching.layer(search_layer)));
    let search_as = |user: &'static str| {
        let request = Request::post("/search")
            .header("x-user-id", user)
            .body(Body::empty())
            .unwrap();
        let router = router.clone();
        async move { router.oneshot(request).await.unwrap().status() }
    };
    let minute = Duration::from_secs(60);
    let (alice, bob) = (Identity::user("alice"), Identity::user("bob"));
    control.block(&alice, minute).await.unwrap();
    assert_eq!(search_as("alice").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        reply(&router, "alice", None).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Bob blocked in the search route's store only, for longer.
    search_control.block(&bob, 2 * minute).await.unwrap();
    assert!(control.blocked(&bob).is_some_and(|left| left > minute));
    let listed = |after, max| {
        let page = control.blocks(after, max).unwrap();
        page.into_iter().map(|b| b.key).collect::<Vec<_>>()
    };
    let every = listed(None, 10);
    assert_eq!(every.len(), 2, "alice once, bob: {every:?}");
    assert!(
        every[0].ends_with("alice") && every[1].ends_with("bob"),
        "{every:?}"
    );
    assert_eq!(listed(None, 1), every[..1]);
    assert_eq!(listed(Some(every[0].as_str()), 1), every[1..]);
    let routes: Vec<String> = (control.limits(&alice).await.unwrap())
        .into_iter()
        .map(|state| state.route)
        .collect();
    assert_eq!(routes, ["POST /replies", "POST /search"]);

    control.unblock(&alice).await.unwrap();
    assert_eq!(search_as("alice").await, StatusCode::OK);
    assert_eq!(reply(&router, "alice", None).await, StatusCode::OK);
    assert_eq!(control.blocked(&alice), None);
}
