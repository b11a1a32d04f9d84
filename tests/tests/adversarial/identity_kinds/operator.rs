//! What the operator's admin routes name: an address's block covers every
//! limited route of that client, a user's its logins too, an API key's
//! every route keyed by it (and nothing else); a reset clears one kind's
//! limits only. Each route names the identity's kind (the kind-less paths
//! are gone) and takes its bytes percent-encoded, decoded once, a
//! non-UTF-8 API key too.

use super::{ATTACKER, Backend, LOCAL, RIGHT, Ugc, VICTIM};
use super::{assert_blocked, assert_login_blocked, client_passes};

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

on_both_stores!(an_address_block_covers_every_limited_route_of_that_client);

async fn an_ipv6_address_block_covers_its_network(backend: Backend) {
    // Behind a proxy on the same host, the client in `x-forwarded-for`.
    let ugc = Ugc::start(backend, &[("LIMITER_TRUSTED_PROXIES", LOCAL)]);
    ugc.block("ip/2001:db8:1:2::5", 60).await;
    // The requests of an IPv6 client count by its /64: so does its block.
    assert_eq!(ugc.blocked("ip/2001:db8:1:2::%2F64").await, Some(60));
    assert_eq!(ugc.blocked("ip/2001:db8:1:2::6").await, Some(60));
    let neighbour: [(&str, &[u8]); 1] = [("x-forwarded-for", b"2001:db8:1:2::6")];
    let feed = ugc.send(LOCAL, "GET", "/feed", &neighbour, b"").await;
    assert_blocked(&feed, "60");
    assert_blocked(&ugc.reply(LOCAL, "zoe", &neighbour).await, "60");
    // The next /64, and the proxy's own requests, pass.
    let next: [(&str, &[u8]); 1] = [("x-forwarded-for", b"2001:db8:1:3::6")];
    client_passes(&ugc, LOCAL, &next, "zoe").await;
    assert_eq!(ugc.reply(LOCAL, "zoe", &[]).await.status, 201);
}

on_both_stores!(an_ipv6_address_block_covers_its_network);

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

on_both_stores!(a_blocked_user_cannot_log_in_even_with_the_right_password);

async fn a_key_block_covers_every_route_keyed_by_that_key_only(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    ugc.block("key/k1", 60).await;
    for path in ["/search", "/api/search"] {
        let blocked = ugc
            .send(VICTIM, "GET", path, &[("x-api-key", b"k1")], b"")
            .await;
        assert_blocked(&blocked, "60");
        let other = ugc
            .send(VICTIM, "GET", path, &[("x-api-key", b"k2")], b"")
            .await;
        assert_eq!(other.status, 200, "{path}: {other:#?}");
    }
    // Neither the client that sent it nor a user named like the key is
    // blocked.
    assert_eq!(ugc.reply(VICTIM, "k1", &[]).await.status, 201);
    client_passes(&ugc, VICTIM, &[], "k1").await;
    assert_eq!(ugc.blocked("user/k1").await, None);
    assert_eq!(ugc.blocked("ip/127.0.0.2").await, None);
}

on_both_stores!(a_key_block_covers_every_route_keyed_by_that_key_only);

async fn a_reset_names_one_kind(backend: Backend) {
    let ugc = Ugc::start(backend, &[]);
    const REPLIES: &str = "POST /posts/{id}/replies";
    const LOGINS: &str = "POST /login";
    // The user `127.0.0.2` replies twice; the client at 127.0.0.2 fails
    // to log in twice.
    for _ in 0..2 {
        assert_eq!(ugc.reply(ATTACKER, VICTIM, &[]).await.status, 201);
        let login = ugc.login(VICTIM, "carol", "wrong", &[]).await;
        assert_eq!(login.status, 401, "{login:#?}");
    }
    assert_eq!(ugc.remaining("user/127.0.0.2", REPLIES).await, 3);
    assert_eq!(ugc.remaining("ip/127.0.0.2", LOGINS).await, 3);
    // The address's reset leaves the user's replies.
    let reset = ugc.admin("DELETE", "/admin/limits/ip/127.0.0.2", "").await;
    assert_eq!(reset.status, 204, "{reset:#?}");
    assert_eq!(ugc.remaining("ip/127.0.0.2", LOGINS).await, 5);
    assert_eq!(ugc.remaining("user/127.0.0.2", REPLIES).await, 3);
    // The user's reset leaves the address's failed logins.
    let login = ugc.login(VICTIM, "carol", "wrong", &[]).await;
    assert_eq!(login.status, 401, "{login:#?}");
    let reset = ugc
        .admin("DELETE", "/admin/limits/user/127.0.0.2", "")
        .await;
    assert_eq!(reset.status, 204, "{reset:#?}");
    assert_eq!(ugc.remaining("user/127.0.0.2", REPLIES).await, 5);
    assert_eq!(ugc.remaining("ip/127.0.0.2", LOGINS).await, 4);
}

on_both_stores!(a_reset_names_one_kind);

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

on_both_stores!(a_non_utf8_api_key_is_named_by_its_percent_encoded_bytes);

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
