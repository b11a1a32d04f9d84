//! Deny lists: networks and identities refused with 403 by every limit of
//! a router layer, or by one limit, found as allow lists find theirs.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use limiter_tests::http::{Response, send, send_from, serve, status_of};
use limiter_tower::{
    Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule, rate_limit,
};
use serde_json::Value;

#[rate_limit(rules = [(100, 60s)], by = ip, deny = ["127.0.0.3"], deny_identities = ["127.0.0.4"])]
async fn upload() -> &'static str {
    "stored"
}

async fn server() -> SocketAddr {
    let per_minute =
        Policy::sliding_log([Rule::new(100, Duration::from_secs(60)).unwrap()]).unwrap();
    let replies =
        LimitLayer::new("replies", per_minute, KeySource::user()).deny_identities(["mallory"]);
    let router = Router::new()
        .route("/replies", post(|| async { "sent" }).layer(replies))
        .route("/uploads", post(upload))
        .layer(
            LimiterLayer::new(Limiter::new(MemoryStore::new()))
                .user(|parts| {
                    parts
                        .headers
                        .get("x-user-id")?
                        .to_str()
                        .ok()
                        .map(str::to_owned)
                })
                .deny_ips(["127.0.0.2/32".parse().unwrap()])
                .deny_identities(["eve"]),
        );
    serve(router).await
}

async fn post_as(addr: SocketAddr, from: &str, path: &str, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    let from: IpAddr = from.parse().unwrap();
    send_from(from, addr, "POST", path, &headers, b"")
        .await
        .unwrap()
}

fn assert_denied(response: &Response) {
    assert_eq!(response.status, 403, "{response:#?}");
    assert!(!response.headers.contains_key("ratelimit"), "{response:#?}");
    let problem: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(problem["type"], limiter_tower::DENIED);
}

#[tokio::test]
async fn deny_lists_refuse_networks_and_identities_layer_wide_and_per_limit() {
    let addr = server().await;
    // Layer-wide: an address on every limit, an identity on its limits.
    assert_denied(&post_as(addr, "127.0.0.2", "/replies", "bob").await);
    assert_denied(&post_as(addr, "127.0.0.2", "/uploads", "bob").await);
    assert_denied(&post_as(addr, "127.0.0.1", "/replies", "eve").await);
    // The uploads limit is by address: eve is no identity of it.
    assert_eq!(
        post_as(addr, "127.0.0.1", "/uploads", "eve").await.status,
        200
    );
    // Per limit: mallory on replies only; the upload handler's own lists.
    assert_denied(&post_as(addr, "127.0.0.1", "/replies", "mallory").await);
    assert_eq!(
        post_as(addr, "127.0.0.1", "/uploads", "mallory")
            .await
            .status,
        200
    );
    assert_denied(&post_as(addr, "127.0.0.3", "/uploads", "bob").await);
    assert_denied(&post_as(addr, "127.0.0.4", "/uploads", "bob").await);
    assert_eq!(
        post_as(addr, "127.0.0.3", "/replies", "bob").await.status,
        200
    );
    // A forged forwarding header buys nothing: no proxy is trusted.
    let headers: [(&str, &[u8]); 2] = [("x-user-id", b"bob"), ("x-forwarded-for", b"10.9.9.9")];
    let from: IpAddr = "127.0.0.2".parse().unwrap();
    let forged = send_from(from, addr, "POST", "/uploads", &headers, b"")
        .await
        .unwrap();
    assert_denied(&forged);
    let fine = send(addr, "POST", "/replies", &[("x-user-id", b"bob")], b"")
        .await
        .unwrap();
    assert_eq!(fine.status, 200);
}

/// A router layer's lists reach limits of every kind, so a plain entry
/// names a user and a typed one its own kind: an API key spelled like an
/// allowed user is no allowed user, and a denied key is not a user.
#[tokio::test]
async fn a_router_layers_identity_lists_hold_one_kind_each() {
    let one_a_minute = || Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]);
    let by_key = LimitLayer::new(
        "search",
        one_a_minute().unwrap(),
        KeySource::header(axum::http::HeaderName::from_static("x-api-key")),
    );
    let by_user = LimitLayer::new("replies", one_a_minute().unwrap(), KeySource::user());
    let router = Router::new()
        .route("/search", post(|| async { "found" }).layer(by_key))
        .route("/replies", post(|| async { "sent" }).layer(by_user))
        .layer(
            LimiterLayer::new(Limiter::new(MemoryStore::new()))
                .user(|parts| {
                    let user = parts.headers.get("x-user-id")?.to_str().ok()?;
                    Some(user.to_owned())
                })
                .allow_identities(["partner"])
                .deny_identities([Identity::header("x-api-key", "leaked")]),
        );
    let addr = serve(router).await;
    let with = |name: &'static str, value: &'static str| async move {
        let headers: [(&str, &[u8]); 1] = [(name, value.as_bytes())];
        let path = if name == "x-api-key" {
            "/search"
        } else {
            "/replies"
        };
        status_of(addr, "POST", path, &headers).await
    };
    // The user partner bypasses the replies limit: three pass.
    for _ in 0..3 {
        assert_eq!(with("x-user-id", "partner").await, 200);
    }
    // The API key "partner" is limited as any key: one a minute.
    assert_eq!(with("x-api-key", "partner").await, 200);
    assert_eq!(with("x-api-key", "partner").await, 429);
    // The denied key is refused; the user named like it is not.
    assert_denied(&{
        let headers: [(&str, &[u8]); 1] = [("x-api-key", b"leaked")];
        send(addr, "POST", "/search", &headers, b"").await.unwrap()
    });
    assert_eq!(with("x-user-id", "leaked").await, 200);
}
