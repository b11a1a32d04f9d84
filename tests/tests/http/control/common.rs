//! What the control tests share: the UGC server on the memory store
//! (time moved by hand) or on Redis, and its routes.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use limiter_examples::admin::AdminToken;
use limiter_examples::{Options, app};
use limiter_tests::TestRedis;
use limiter_tests::http::{Response, send};
use limiter_tower::{GuardConfig, Limiter, ManualClock, MemoryStore};
use serde_json::Value;

pub(crate) const T0: Duration = Duration::from_secs(1_750_000_000);
pub(crate) const ADMIN_TOKEN: &str = "control-admin-token";

pub(crate) fn options() -> Options {
    Options {
        admin_token: Some(AdminToken::new(ADMIN_TOKEN).unwrap()),
        guard: GuardConfig {
            deadline: Duration::from_secs(5),
            ..GuardConfig::default()
        },
        ..Options::default()
    }
}

pub(crate) async fn memory_server() -> (SocketAddr, ManualClock) {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    (
        limiter_tests::http::serve(app(limiter, options())).await,
        clock,
    )
}

pub(crate) async fn redis_server(redis: &TestRedis) -> SocketAddr {
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    limiter_tests::http::serve(app(limiter, options())).await
}

pub(crate) async fn reply(addr: SocketAddr, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    send(addr, "POST", "/posts/1/replies", &headers, b"")
        .await
        .unwrap()
}

pub(crate) async fn my_limits(addr: SocketAddr, user: &str) -> Value {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    let response = send(addr, "GET", "/me/limits", &headers, b"")
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{response:#?}");
    serde_json::from_str(&response.body).unwrap()
}

pub(crate) async fn admin(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Response {
    let value = token.map(|t| format!("Bearer {t}").into_bytes());
    let headers: Vec<(&str, &[u8])> = value.iter().map(|v| ("authorization", &v[..])).collect();
    send(addr, method, path, &headers, b"").await.unwrap()
}

pub(crate) async fn like(addr: SocketAddr, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    send(addr, "POST", "/posts/1/likes", &headers, b"")
        .await
        .unwrap()
}

/// `PUT /admin/blocks/{identity}`, `identity` being `{kind}/{value}` as the
/// admin routes name it (`user/mallory`, `ip/127.0.0.1`).
pub(crate) async fn block(
    addr: SocketAddr,
    identity: &str,
    body: &str,
    token: Option<&str>,
) -> Response {
    let value = token.map(|t| format!("Bearer {t}").into_bytes());
    let headers: Vec<(&str, &[u8])> = value.iter().map(|v| ("authorization", &v[..])).collect();
    let path = format!("/admin/blocks/{identity}");
    send(addr, "PUT", &path, &headers, body.as_bytes())
        .await
        .unwrap()
}

/// A 429 of a block: `Retry-After` the block's time left, a problem of
/// type blocked, no RateLimit fields.
pub(crate) fn assert_blocked(response: &Response, retry_after: &str) {
    assert_eq!(response.status, 429, "{response:#?}");
    assert_eq!(response.header("retry-after"), retry_after);
    assert!(!response.headers.contains_key("ratelimit"), "{response:#?}");
    let problem: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(problem["type"], limiter_tower::BLOCKED);
    assert_eq!(problem["status"], 429);
}
