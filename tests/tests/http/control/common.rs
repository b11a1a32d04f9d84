//! What the control tests share besides the UGC server
//! ([`limiter_tests::ugc`]): its routes.

#![allow(dead_code)]

use std::net::SocketAddr;

use limiter_tests::http::{Response, send};
pub(crate) use limiter_tests::ugc::{ADMIN_TOKEN, T0, like, memory_server, redis_server, reply};
use serde_json::Value;

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
    limiter_tests::http::admin(addr, None, method, path, "", token).await
}

/// `PUT /admin/blocks/{identity}`, `identity` being `{kind}/{value}` as the
/// admin routes name it (`user/mallory`, `ip/127.0.0.1`).
pub(crate) async fn block(
    addr: SocketAddr,
    identity: &str,
    body: &str,
    token: Option<&str>,
) -> Response {
    let path = format!("/admin/blocks/{identity}");
    limiter_tests::http::admin(addr, None, "PUT", &path, body, token).await
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
