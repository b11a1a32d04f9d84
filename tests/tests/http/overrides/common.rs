//! What the override tests share: UGC instances on one Redis, the admin
//! routes, and the posts limit decided by its compiled rules or by an
//! override of 1 per 60 s.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use limiter_examples::app;
use limiter_tests::RedisServer;
use limiter_tests::http::{Response, send_from, serve};
use limiter_tower::{Limiter, ManualClock, RedisConfig, RedisStore};
use serde_json::{Value, json};

pub(crate) use limiter_tests::ugc::ADMIN_TOKEN as TOKEN;
pub(crate) use limiter_tests::ugc::{T0, like, options, reply};
/// The posts limit, as its keys end and overrides name it.
pub(crate) const POSTS: &str = "posts-create_post";
pub(crate) const POSTS_OVERRIDE: &str = "/admin/overrides/posts-create_post";
/// Where Redis keeps the overrides.
pub(crate) const OVERRIDES_HASH: &str = "{limiter:resets}:overrides";
/// The channel every instance subscribes to.
const CHANNEL: &str = "limiter:resets";

/// A UGC instance (in process) with a store of its own on `redis`.
pub(crate) async fn redis_instance(redis: &RedisServer) -> SocketAddr {
    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&redis.url(), config)
        .await
        .expect("connect to the test Redis");
    serve(app(Limiter::new(store), options())).await
}

/// `N` UGC instances on `redis`, each subscribed to its notices.
pub(crate) async fn subscribed_instances<const N: usize>(redis: &RedisServer) -> [SocketAddr; N] {
    let mut instances = [SocketAddr::from(([0, 0, 0, 0], 0)); N];
    for instance in &mut instances {
        *instance = redis_instance(redis).await;
    }
    subscribed(redis, &instances).await;
    instances
}

/// `PUT {path}` with `body` on `addr`, answered 204.
pub(crate) async fn put_override(addr: SocketAddr, path: &str, body: &str) {
    let set = admin(addr, "PUT", path, body, Some(TOKEN)).await;
    assert_eq!((set.status, set.body.as_str()), (204, ""), "{set:#?}");
}

/// A UGC instance (in process) on the memory store, time moved by hand.
pub(crate) async fn memory_instance_with(clock: ManualClock) -> SocketAddr {
    limiter_tests::ugc::memory_server_with(clock).await
}

/// A UGC instance (in process) on the memory store.
pub(crate) async fn memory_instance() -> SocketAddr {
    memory_instance_with(ManualClock::new(T0)).await
}

/// Waits until each of `instances` is subscribed to `redis`'s notices:
/// a request to a limited route starts an instance's subscription.
pub(crate) async fn subscribed(redis: &RedisServer, instances: &[SocketAddr]) {
    for (i, addr) in instances.iter().enumerate() {
        let from = client(200 + u8::try_from(i).unwrap());
        let feed = send_from(from, *addr, "GET", "/feed", &[], b"")
            .await
            .unwrap();
        assert_eq!(feed.status, 200, "{feed:#?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = redis.command(&["PUBSUB", "NUMSUB", CHANNEL]);
        let count: usize = reply
            .lines()
            .nth(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if count >= instances.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{count} of {} instances subscribed after 10 s",
            instances.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `127.0.0.{n}`: each client its own key of the posts limit.
pub(crate) fn client(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// `POST /posts` from `127.0.0.{from}`.
pub(crate) async fn post(addr: SocketAddr, from: u8) -> Response {
    send_from(client(from), addr, "POST", "/posts", &[], b"")
        .await
        .unwrap()
}

/// An admin request with `body` (JSON), and the token when given.
pub(crate) async fn admin(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> Response {
    limiter_tests::http::admin(addr, None, method, path, body, token).await
}

/// `GET /admin/overrides`.
pub(crate) async fn overrides(addr: SocketAddr) -> Value {
    let listed = admin(addr, "GET", "/admin/overrides", "", Some(TOKEN)).await;
    assert_eq!(listed.status, 200, "{listed:#?}");
    serde_json::from_str(&listed.body).unwrap()
}

/// `GET /admin/overrides` until `done` holds for it, within `within`.
pub(crate) async fn poll_overrides(
    addr: SocketAddr,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let listed = overrides(addr).await;
        if done(&listed) {
            return listed;
        }
        assert!(
            Instant::now() < deadline,
            "still listed after {within:?}: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The posts limit's override as `GET /admin/overrides` lists it.
pub(crate) fn override_state(
    mode: &str,
    algorithm: Option<&str>,
    rules: &[&str],
    seconds: u64,
) -> Value {
    json!({
        "limit": POSTS,
        "mode": mode,
        "algorithm": algorithm,
        "rules": rules,
        "seconds": seconds,
    })
}

/// A problem+json answer's status and detail.
pub(crate) fn problem(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{response:#?}");
    assert_eq!(
        response.header("content-type"),
        "application/problem+json",
        "{response:#?}"
    );
    let body: Value = serde_json::from_str(&response.body).unwrap();
    body["detail"].as_str().unwrap().to_owned()
}

/// Asserts a 429 whose `RateLimit-Policy` names exactly `rules` (name,
/// quota, window in seconds).
pub(crate) fn assert_denied_by(response: &Response, rules: &[(&str, i64, i64)]) {
    assert_eq!(response.status, 429, "{response:#?}");
    let expected: Vec<(String, HashMap<String, i64>)> = rules
        .iter()
        .map(|&(name, q, w)| {
            let params = [("q".to_owned(), q), ("w".to_owned(), w)].into();
            (name.to_owned(), params)
        })
        .collect();
    assert_eq!(
        response.rate_limit_field("ratelimit-policy"),
        expected,
        "{response:#?}"
    );
}

/// The compiled posts limit: 10 per 60 s, 20 per 120 s, no duplicate
/// within 5 s.
pub(crate) const COMPILED: [(&str, i64, i64); 3] = [
    ("10-per-60s", 10, 60),
    ("20-per-120s", 20, 120),
    ("1-per-5s", 1, 5),
];

/// A fresh client's two posts on `addr`, decided by the compiled limit:
/// the first allowed, the second a duplicate (429 naming its rules).
pub(crate) async fn assert_compiled(addr: SocketAddr, from: u8) {
    let first = post(addr, from).await;
    assert_eq!(first.status, 201, "{first:#?}");
    assert_denied_by(&post(addr, from).await, &COMPILED);
}

/// A fresh client's two posts on `addr`, decided by the override of 1
/// per 60 s: the first allowed, the second 429 naming `1-per-60s`.
pub(crate) async fn assert_overridden(addr: SocketAddr, from: u8) {
    let first = post(addr, from).await;
    assert_eq!(first.status, 201, "{first:#?}");
    let second = post(addr, from).await;
    assert_denied_by(&second, &[("1-per-60s", 1, 60)]);
}
