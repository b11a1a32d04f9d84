//! Identities of one kind posing as another's. A user id that spells a
//! client address, an API key or an IPv6 network earns its penalty block as
//! a user: the address, the key, the network stay free. An operator's block
//! of an address covers every limited route of that client, whatever the
//! route counts by; a blocked user cannot log in, even with the right
//! password. The admin routes name the kind (the kind-less paths are gone)
//! and take any bytes, a non-UTF-8 API key too. Against the real `ugc`
//! binary, on the memory store and on Redis, from loopback addresses of
//! their own (real time: each check runs well within its window).

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
        let authorization = format!("Bearer {TOKEN}");
        let headers: [(&str, &[u8]); 1] = [("authorization", authorization.as_bytes())];
        self.send(LOCAL, method, path, &headers, body.as_bytes())
            .await
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
        match response.status {
            404 => None,
            200 => {
                let body: Value = serde_json::from_str(&response.body).unwrap();
                let seconds = body["seconds"].as_u64();
                assert_eq!(body, json!({ "seconds": seconds }), "{path}");
                seconds
            }
            _ => panic!("{path}: {response:#?}"),
        }
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

async fn a_user_named_like_an_address_does_not_block_that_address(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    ugc.earn_penalty(ATTACKER, VICTIM, &[]).await;
    // The client at that address, without a user id: posts, reads, logs in.
    client_passes(&ugc, VICTIM, &[], "carol").await;
    assert_eq!(ugc.reply(VICTIM, "carol", &[]).await.status, 201);
    // The user `127.0.0.2` is blocked, from any address, at login too.
    assert_blocked(&ugc.reply(VICTIM, VICTIM, &[]).await, PENALTY);
    assert_login_blocked(&ugc.login(VICTIM, VICTIM, RIGHT, &[]).await, PENALTY);
    assert_eq!(ugc.blocked("user/127.0.0.2").await, Some(900));
    assert_eq!(ugc.blocked("ip/127.0.0.2").await, None);
    // The attacker's own address is not blocked either: the user is.
    assert_eq!(ugc.blocked("ip/127.0.0.3").await, None);
}

#[tokio::test]
async fn a_user_named_like_an_address_does_not_block_that_address_on_memory() {
    a_user_named_like_an_address_does_not_block_that_address(Backend::Memory).await;
}

#[tokio::test]
async fn a_user_named_like_an_address_does_not_block_that_address_on_redis() {
    a_user_named_like_an_address_does_not_block_that_address(Backend::Redis).await;
}

async fn a_user_named_like_an_api_key_does_not_block_that_key(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    ugc.earn_penalty(ATTACKER, "victim-api-key", &[]).await;
    for from in [VICTIM, ATTACKER] {
        let search = ugc.search(from, b"victim-api-key").await;
        assert_eq!(search.status, 200, "{from}: {search:#?}");
    }
    assert_eq!(ugc.remaining("key/victim-api-key", "GET /search").await, 8);
    assert_eq!(ugc.blocked("user/victim-api-key").await, Some(900));
    assert_eq!(ugc.blocked("key/victim-api-key").await, None);
}

#[tokio::test]
async fn a_user_named_like_an_api_key_does_not_block_that_key_on_memory() {
    a_user_named_like_an_api_key_does_not_block_that_key(Backend::Memory).await;
}

#[tokio::test]
async fn a_user_named_like_an_api_key_does_not_block_that_key_on_redis() {
    a_user_named_like_an_api_key_does_not_block_that_key(Backend::Redis).await;
}

async fn a_user_named_like_an_ipv6_network_does_not_block_it(backend: Backend) {
    // A proxy on the same host: the client is in `x-forwarded-for`.
    let ugc = Ugc::start(backend, &[("LIMITER_TRUSTED_PROXIES", LOCAL)]);
    let attacker: [(&str, &[u8]); 1] = [("x-forwarded-for", b"198.51.100.7")];
    ugc.earn_penalty(LOCAL, "2001:db8:1:2::/64", &attacker)
        .await;
    // The clients of that network (one key for the /64).
    let client: [(&str, &[u8]); 1] = [("x-forwarded-for", b"2001:db8:1:2::5")];
    client_passes(&ugc, LOCAL, &client, "carol").await;
    let neighbour: [(&str, &[u8]); 1] = [("x-forwarded-for", b"2001:db8:1:2::6")];
    let feed = ugc.send(LOCAL, "GET", "/feed", &neighbour, b"").await;
    assert_eq!(feed.status, 200, "{feed:#?}");
    // Its post would repeat the /64's within 5 s: the duplicate check.
    let post = ugc.send(LOCAL, "POST", "/posts", &neighbour, b"").await;
    assert_quota_denied(&post, "a duplicate post of the /64");
    assert_eq!(ugc.blocked("user/2001:db8:1:2::%2F64").await, Some(900));
    for network in ["ip/2001:db8:1:2::5", "ip/2001:db8:1:2::%2F64"] {
        assert_eq!(ugc.blocked(network).await, None, "{network}");
    }
}

#[tokio::test]
async fn a_user_named_like_an_ipv6_network_does_not_block_it_on_memory() {
    a_user_named_like_an_ipv6_network_does_not_block_it(Backend::Memory).await;
}

#[tokio::test]
async fn a_user_named_like_an_ipv6_network_does_not_block_it_on_redis() {
    a_user_named_like_an_ipv6_network_does_not_block_it(Backend::Redis).await;
}

async fn behind_an_untrusted_same_host_proxy_the_user_127_0_0_1_blocks_no_one_else(
    backend: Backend,
) {
    // No trusted proxy: every client's peer, and so its address, is the
    // proxy's, 127.0.0.1.
    let ugc = Ugc::start(backend, &[]);
    ugc.earn_penalty(LOCAL, LOCAL, &[]).await;
    assert_eq!(ugc.blocked("user/127.0.0.1").await, Some(900));
    assert_eq!(ugc.blocked("ip/127.0.0.1").await, None);
    // Other users, and requests without one, still pass through it.
    assert_eq!(ugc.reply(LOCAL, "bob", &[]).await.status, 201);
    let bob: [(&str, &[u8]); 1] = [("x-user-id", b"bob")];
    let feed = ugc.send(LOCAL, "GET", "/feed", &bob, b"").await;
    assert_eq!(feed.status, 200, "{feed:#?}");
    client_passes(&ugc, LOCAL, &[], "carol").await;
}

#[tokio::test]
async fn behind_an_untrusted_same_host_proxy_the_user_127_0_0_1_blocks_no_one_else_on_memory() {
    behind_an_untrusted_same_host_proxy_the_user_127_0_0_1_blocks_no_one_else(Backend::Memory)
        .await;
}

#[tokio::test]
async fn behind_an_untrusted_same_host_proxy_the_user_127_0_0_1_blocks_no_one_else_on_redis() {
    behind_an_untrusted_same_host_proxy_the_user_127_0_0_1_blocks_no_one_else(Backend::Redis).await;
}

async fn an_address_block_covers_every_limited_route_of_that_client(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    ugc.block("ip/127.0.0.2", 60).await;
    assert_eq!(ugc.blocked("ip/127.0.0.2").await, Some(60));
    // By user, by API key, by address: the client is blocked on each.
    assert_blocked(&ugc.reply(VICTIM, "zoe", &[]).await, "60");
    assert_blocked(&ugc.search(VICTIM, b"zoe-key").await, "60");
    for (method, path) in [("POST", "/posts"), ("GET", "/feed")] {
        assert_blocked(&ugc.send(VICTIM, method, path, &[], b"").await, "60");
    }
    // Login is limited by address on its route: the layer answers.
    assert_blocked(&ugc.login(VICTIM, "zoe", RIGHT, &[]).await, "60");
    // Not limited: served.
    let health = ugc.send(VICTIM, "GET", "/health", &[], b"").await;
    assert_eq!(health.status, 200, "{health:#?}");
    // The user and the key are not blocked: from another address they pass,
    // with their whole quota (the blocked requests counted nothing).
    assert_eq!(ugc.blocked("user/zoe").await, None);
    assert_eq!(ugc.blocked("key/zoe-key").await, None);
    assert_eq!(ugc.reply(ATTACKER, "zoe", &[]).await.status, 201);
    assert_eq!(ugc.search(ATTACKER, b"zoe-key").await.status, 200);
    assert_eq!(
        ugc.remaining("user/zoe", "POST /posts/{id}/replies").await,
        4
    );
    assert_eq!(ugc.remaining("key/zoe-key", "GET /search").await, 9);
    client_passes(&ugc, ATTACKER, &[], "zoe").await;
    // Lifted: the client passes again.
    let unblock = ugc.admin("DELETE", "/admin/blocks/ip/127.0.0.2", "").await;
    assert_eq!(unblock.status, 204, "{unblock:#?}");
    assert_eq!(ugc.blocked("ip/127.0.0.2").await, None);
    assert_eq!(ugc.reply(VICTIM, "zoe", &[]).await.status, 201);
    client_passes(&ugc, VICTIM, &[], "zoe").await;
}

#[tokio::test]
async fn an_address_block_covers_every_limited_route_of_that_client_on_memory() {
    an_address_block_covers_every_limited_route_of_that_client(Backend::Memory).await;
}

#[tokio::test]
async fn an_address_block_covers_every_limited_route_of_that_client_on_redis() {
    an_address_block_covers_every_limited_route_of_that_client(Backend::Redis).await;
}

async fn a_blocked_user_cannot_log_in_even_with_the_right_password(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    ugc.block("user/alice", 60).await;
    assert_eq!(ugc.blocked("user/alice").await, Some(60));
    for from in [VICTIM, ATTACKER] {
        assert_login_blocked(&ugc.login(from, "alice", RIGHT, &[]).await, "60");
        assert_blocked(&ugc.reply(from, "alice", &[]).await, "60");
    }
    // Bob, from the same addresses, is not affected; nor are they.
    for from in [VICTIM, ATTACKER] {
        let login = ugc.login(from, "bob", RIGHT, &[]).await;
        assert_eq!(login.status, 200, "{login:#?}");
        assert_eq!(ugc.reply(from, "bob", &[]).await.status, 201);
    }
    assert_eq!(ugc.blocked("ip/127.0.0.2").await, None);
    // Alice's blocked attempts counted nothing: her failed logins are whole.
    assert_eq!(ugc.remaining("user/alice", "POST /login").await, 5);
    let unblock = ugc.admin("DELETE", "/admin/blocks/user/alice", "").await;
    assert_eq!(unblock.status, 204, "{unblock:#?}");
    let login = ugc.login(VICTIM, "alice", RIGHT, &[]).await;
    assert_eq!(login.status, 200, "{login:#?}");
}

#[tokio::test]
async fn a_blocked_user_cannot_log_in_even_with_the_right_password_on_memory() {
    a_blocked_user_cannot_log_in_even_with_the_right_password(Backend::Memory).await;
}

#[tokio::test]
async fn a_blocked_user_cannot_log_in_even_with_the_right_password_on_redis() {
    a_blocked_user_cannot_log_in_even_with_the_right_password(Backend::Redis).await;
}

#[tokio::test]
async fn the_admin_routes_without_a_kind_are_gone() {
    let ugc = Ugc::start(Backend::Memory, &[]);
    assert_eq!(ugc.reply(VICTIM, "alice", &[]).await.status, 201);
    let block = r#"{"seconds": 60}"#;
    for (method, path, body) in [
        ("GET", "/admin/limits/alice", ""),
        ("DELETE", "/admin/limits/alice", ""),
        ("GET", "/admin/limits/127.0.0.2", ""),
        ("GET", "/admin/blocks/alice", ""),
        ("PUT", "/admin/blocks/alice", block),
        ("DELETE", "/admin/blocks/alice", ""),
        ("PUT", "/admin/blocks/127.0.0.2", block),
        // An unknown kind.
        ("GET", "/admin/limits/users/alice", ""),
        ("PUT", "/admin/blocks/address/127.0.0.2", block),
    ] {
        let response = ugc.admin(method, path, body).await;
        assert_eq!(response.status, 404, "{method} {path}: {response:#?}");
    }
    // Nothing was reset nor blocked.
    assert_eq!(
        ugc.remaining("user/alice", "POST /posts/{id}/replies")
            .await,
        4
    );
    assert_eq!(ugc.blocked("user/alice").await, None);
    assert_eq!(ugc.blocked("ip/127.0.0.2").await, None);
    assert_eq!(ugc.reply(VICTIM, "alice", &[]).await.status, 201);
    // An `ip` that is no address: 400.
    let response = ugc.admin("PUT", "/admin/blocks/ip/alice", block).await;
    assert_eq!(response.status, 400, "{response:#?}");
}

async fn a_non_utf8_api_key_is_named_by_its_percent_encoded_bytes(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    const KEY: &[u8] = b"caf\xE9";
    for i in 0..3 {
        let search = ugc.search(ATTACKER, KEY).await;
        assert_eq!(search.status, 200, "search {i}: {search:#?}");
    }
    assert_eq!(ugc.remaining("key/caf%E9", "GET /search").await, 7);
    // `café` in UTF-8 is another key.
    assert_eq!(ugc.remaining("key/caf%C3%A9", "GET /search").await, 10);
    let reset = ugc.admin("DELETE", "/admin/limits/key/caf%E9", "").await;
    assert_eq!(reset.status, 204, "{reset:#?}");
    assert_eq!(ugc.remaining("key/caf%E9", "GET /search").await, 10);
    ugc.block("key/caf%E9", 60).await;
    assert_eq!(ugc.blocked("key/caf%E9").await, Some(60));
    assert_blocked(&ugc.search(ATTACKER, KEY).await, "60");
    assert_eq!(ugc.search(ATTACKER, b"cafe").await.status, 200);
    assert_eq!(ugc.search(ATTACKER, "café".as_bytes()).await.status, 200);
}

#[tokio::test]
async fn a_non_utf8_api_key_is_named_by_its_percent_encoded_bytes_on_memory() {
    a_non_utf8_api_key_is_named_by_its_percent_encoded_bytes(Backend::Memory).await;
}

#[tokio::test]
async fn a_non_utf8_api_key_is_named_by_its_percent_encoded_bytes_on_redis() {
    a_non_utf8_api_key_is_named_by_its_percent_encoded_bytes(Backend::Redis).await;
}

/// A key with a literal `%`: its path names it with `%25`, decoded once.
#[tokio::test]
async fn an_identity_holding_a_percent_sign_is_named_exactly() {
    let ugc = Ugc::start(Backend::Memory, &[]);
    for i in 0..3 {
        let search = ugc.search(ATTACKER, b"k%41").await;
        assert_eq!(search.status, 200, "search {i}: {search:#?}");
    }
    assert_eq!(ugc.remaining("key/k%2541", "GET /search").await, 7);
    // `kA` is another key, untouched.
    assert_eq!(ugc.remaining("key/kA", "GET /search").await, 10);
}
