//! Identities of one kind posing as another's. A user id that spells a
//! client address, an API key or an IPv6 network earns its penalty block as
//! a user: the address, the key, the network stay free. An operator's block
//! of an address covers every limited route of that client, whatever the
//! route counts by; a blocked user cannot log in, even with the right
//! password. The admin routes name the kind (the kind-less paths are gone)
//! and take any bytes, a non-UTF-8 API key too. Against the real `ugc`
//! binary, on the memory store and on Redis, from loopback addresses of
//! their own (real time: each check runs well within its window). This
//! file holds the harness; `posing` the attacks, `operator` the admin
//! routes.

use std::net::IpAddr;

use limiter_tests::http::{Response, send_from};
use limiter_tests::{RedisServer, UgcServer};
use serde_json::{Value, json};

const TOKEN: &str = "identity-kinds-admin-token";
const RIGHT: &str = "let-me-in";
/// The same-host proxy, or the admin's own address.
const LOCAL: &str = "127.0.0.1";
/// The client whose address the attacker spells.
const VICTIM: &str = "127.0.0.2";
const ATTACKER: &str = "127.0.0.3";
/// A reply penalty's first block (`POST /posts/{id}/replies`: 3 denials
/// within 10 min block the user for 15 min).
const PENALTY: &str = "900";

#[derive(Debug, Clone, Copy)]
enum Backend {
    Memory,
    Redis,
}

/// A `ugc` process with the admin token, on the memory store or on a
/// Redis of its own (stopped after the process).
struct Ugc {
    server: UgcServer,
    _redis: Option<RedisServer>,
}

impl Ugc {
    fn start(backend: Backend, env: &[(&str, &str)]) -> Self {
        let redis = matches!(backend, Backend::Redis).then(RedisServer::start);
        let url = redis.as_ref().map(RedisServer::url);
        let mut all = vec![("LIMITER_ADMIN_TOKEN", TOKEN)];
        all.extend_from_slice(env);
        if let Some(url) = &url {
            all.push(("REDIS_URL", url));
            all.push(("LIMITER_STORE_DEADLINE_MS", "5000"));
        }
        Self {
            server: UgcServer::start(&all),
            _redis: redis,
        }
    }

    async fn send(
        &self,
        from: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> Response {
        let from: IpAddr = from.parse().unwrap();
        send_from(from, self.server.addr(), method, path, headers, body)
            .await
            .unwrap()
    }

    /// A reply from `from` as `user`, with `headers` besides.
    async fn reply(&self, from: &str, user: &str, headers: &[(&str, &[u8])]) -> Response {
        let mut headers = headers.to_vec();
        headers.push(("x-user-id", user.as_bytes()));
        self.send(from, "POST", "/posts/1/replies", &headers, b"")
            .await
    }

    /// `POST /login` from `from` as `user` with `password`.
    async fn login(
        &self,
        from: &str,
        user: &str,
        password: &str,
        headers: &[(&str, &[u8])],
    ) -> Response {
        let body = json!({ "user": user, "password": password }).to_string();
        let mut headers = headers.to_vec();
        headers.push(("content-type", b"application/json"));
        self.send(from, "POST", "/login", &headers, body.as_bytes())
            .await
    }

    /// `GET /search` from `from` with the API key `key` (raw bytes).
    async fn search(&self, from: &str, key: &[u8]) -> Response {
        self.send(from, "GET", "/search", &[("x-api-key", key)], b"")
            .await
    }

    /// A request to an admin route, with the token, from the admin's
    /// address.
    async fn admin(&self, method: &str, path: &str, body: &str) -> Response {
        let (addr, from) = (self.server.addr(), Some(LOCAL.parse().unwrap()));
        limiter_tests::http::admin(addr, from, method, path, body, Some(TOKEN)).await
    }

    /// `PUT /admin/blocks/{identity}` for `seconds` (`identity` is
    /// `{kind}/{value}`, the value percent-encoded).
    async fn block(&self, identity: &str, seconds: u64) {
        let path = format!("/admin/blocks/{identity}");
        let body = json!({ "seconds": seconds }).to_string();
        let response = self.admin("PUT", &path, &body).await;
        assert_eq!(response.status, 204, "{path}: {response:#?}");
    }

    /// How long `identity` stays blocked, in whole seconds rounded up, as
    /// `GET /admin/blocks/{identity}` answers; `None` when not blocked.
    async fn blocked(&self, identity: &str) -> Option<u64> {
        let path = format!("/admin/blocks/{identity}");
        let response = self.admin("GET", &path, "").await;
        limiter_tests::http::block_seconds(&path, &response)
    }

    /// The remaining count of `route`'s limit for `identity`, as `GET
    /// /admin/limits/{identity}` lists it (the limit must be listed once).
    async fn remaining(&self, identity: &str, route: &str) -> u64 {
        let path = format!("/admin/limits/{identity}");
        let response = self.admin("GET", &path, "").await;
        assert_eq!(response.status, 200, "{path}: {response:#?}");
        let states: Value = serde_json::from_str(&response.body).unwrap();
        let of_route: Vec<&Value> = states
            .as_array()
            .unwrap()
            .iter()
            .filter(|state| state["route"] == route)
            .collect();
        assert_eq!(of_route.len(), 1, "{path}: {states:#}");
        of_route[0]["remaining"].as_u64().unwrap()
    }

    /// Eight replies as `user` from `from`: the 5 a minute pass, the next 3
    /// are denied by the quota, and those 3 denials block `user`.
    async fn earn_penalty(&self, from: &str, user: &str, headers: &[(&str, &[u8])]) {
        for i in 0..5 {
            let response = self.reply(from, user, headers).await;
            assert_eq!(response.status, 201, "reply {i}: {response:#?}");
        }
        for i in 5..8 {
            let response = self.reply(from, user, headers).await;
            assert_quota_denied(&response, &format!("reply {i}"));
        }
        assert_blocked(&self.reply(from, user, headers).await, PENALTY);
    }
}

/// A 429 of a block: `Retry-After` the block's time left, a problem of
/// type blocked, no RateLimit fields.
fn assert_blocked(response: &Response, retry_after: &str) {
    assert!(!response.headers.contains_key("ratelimit"), "{response:#?}");
    assert_block_problem(response, retry_after);
}

/// [`assert_blocked`] for `POST /login`, whose handler answers the block
/// inside the route's own limit by address (which adds its RateLimit
/// fields to any answer).
fn assert_login_blocked(response: &Response, retry_after: &str) {
    assert!(response.headers.contains_key("ratelimit"), "{response:#?}");
    assert_block_problem(response, retry_after);
}

fn assert_block_problem(response: &Response, retry_after: &str) {
    assert_eq!(response.status, 429, "{response:#?}");
    assert_eq!(response.header("retry-after"), retry_after, "{response:#?}");
    assert_eq!(
        response.header("content-type"),
        "application/problem+json",
        "{response:#?}"
    );
    let problem: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(problem["type"], limiter_tower::BLOCKED, "{response:#?}");
    assert_eq!(problem["status"], 429, "{response:#?}");
}

/// A 429 of the quota, with its RateLimit fields.
fn assert_quota_denied(response: &Response, case: &str) {
    assert_eq!(response.status, 429, "{case}: {response:#?}");
    assert!(
        response.headers.contains_key("ratelimit"),
        "{case}: {response:#?}"
    );
    let problem: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(
        problem["type"],
        limiter_tower::QUOTA_EXCEEDED,
        "{case}: {response:#?}"
    );
}

/// Posting, reading and logging in from `from` (with `headers`, the
/// forwarded client) pass: that client is not blocked.
async fn client_passes(ugc: &Ugc, from: &str, headers: &[(&str, &[u8])], user: &str) {
    let post = ugc.send(from, "POST", "/posts", headers, b"").await;
    assert_eq!(post.status, 201, "POST /posts: {post:#?}");
    let feed = ugc.send(from, "GET", "/feed", headers, b"").await;
    assert_eq!(feed.status, 200, "GET /feed: {feed:#?}");
    let login = ugc.login(from, user, RIGHT, headers).await;
    assert_eq!(login.status, 200, "POST /login: {login:#?}");
}

/// The tests of `scenario` (an `async fn(Backend)`): a module of its name
/// with `on_memory` and `on_redis`.
macro_rules! on_both_stores {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test]
            async fn on_memory() {
                super::$scenario(super::Backend::Memory).await;
            }

            #[tokio::test]
            async fn on_redis() {
                super::$scenario(super::Backend::Redis).await;
            }
        }
    };
}

#[path = "identity_kinds/operator.rs"]
mod operator;
#[path = "identity_kinds/posing.rs"]
mod posing;
