//! A user id that spells another kind's identity (an address, an API key,
//! an IPv6 network, the same-host proxy's own address) earns its penalty
//! block as a user: the identity it spells stays free.

use super::{ATTACKER, Backend, LOCAL, PENALTY, RIGHT, Ugc, VICTIM};
use super::{assert_blocked, assert_login_blocked, assert_quota_denied, client_passes};

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

on_both_stores!(a_user_named_like_an_address_does_not_block_that_address);

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

on_both_stores!(a_user_named_like_an_api_key_does_not_block_that_key);

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

on_both_stores!(a_user_named_like_an_ipv6_network_does_not_block_it);

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

on_both_stores!(behind_an_untrusted_same_host_proxy_the_user_127_0_0_1_blocks_no_one_else);
