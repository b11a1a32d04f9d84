//! The UGC example server over real HTTP on 127.0.0.1: every route's exact
//! limit and headers, on the memory store (time moved by hand) and on Redis.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use limiter_examples::{Options, app};
use limiter_tests::http::{Response, send, send_from, serve};
use limiter_tests::ugc::{
    assert_a_second_post_is_a_duplicate, assert_post_denied, assert_the_feed_refills_in_600_ms,
};
use limiter_tower::{Limiter, ManualClock, MemoryStore};

const T0: Duration = Duration::from_secs(1_750_000_000);

async fn memory_server() -> (SocketAddr, ManualClock) {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    (serve(app(limiter, Options::default())).await, clock)
}

async fn post(addr: SocketAddr, path: &str, user: Option<&str>) -> Response {
    let headers: Vec<(&str, &[u8])> = user
        .map(|u| ("x-user-id", u.as_bytes()))
        .into_iter()
        .collect();
    send(addr, "POST", path, &headers, b"{}").await.unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> Response {
    send(addr, "GET", path, &[], b"").await.unwrap()
}

fn params(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[tokio::test]
async fn replies_allow_five_per_minute_per_user() {
    let (addr, clock) = memory_server().await;
    for remaining in (0..5).rev() {
        let ok = post(addr, "/posts/7/replies", Some("laoqian")).await;
        assert_eq!(ok.status, 201);
        assert_eq!(
            ok.rate_limit_field("ratelimit"),
            [(
                "5-per-60s".to_owned(),
                params(&[("r", remaining), ("t", 60)])
            )]
        );
    }
    clock.advance(Duration::from_secs(20));
    let denied = post(addr, "/posts/7/replies", Some("laoqian")).await;
    denied.assert_denied("40", &[("5-per-60s", 5, 60, 0, 40)]);
    assert_eq!(
        post(addr, "/posts/7/replies", Some("xiaoming"))
            .await
            .status,
        201
    );
    assert_eq!(post(addr, "/posts/7/replies", None).await.status, 401);
    clock.advance(Duration::from_secs(40));
    assert_eq!(
        post(addr, "/posts/7/replies", Some("laoqian")).await.status,
        201
    );
}

#[tokio::test]
async fn posts_allow_ten_a_minute_twenty_per_two_minutes_and_no_duplicate() {
    let (addr, clock) = memory_server().await;
    assert_a_second_post_is_a_duplicate(addr).await;
    // One post every 5 s: 10 in the first minute pass.
    for _ in 1..10 {
        clock.advance(Duration::from_secs(5));
        assert_eq!(post(addr, "/posts", None).await.status, 201);
    }
    clock.advance(Duration::from_secs(5));
    // At 50 s: the post at 0 s leaves the 60 s window at 60 s, which is
    // when the first rule lets a post through (`t` = 10), and the 120 s
    // window at 120 s, when the second gives quota back (`t` = 70).
    let denied = post(addr, "/posts", None).await;
    assert_post_denied(&denied, "10", [(0, 10), (10, 70), (1, 0)]);
    clock.advance(Duration::from_secs(10));
    assert_eq!(post(addr, "/posts", None).await.status, 201);
}

#[tokio::test]
async fn likes_are_a_token_bucket_per_user() {
    let (addr, clock) = memory_server().await;
    for _ in 0..10 {
        assert_eq!(
            post(addr, "/posts/1/likes", Some("laoqian")).await.status,
            200
        );
    }
    let denied = post(addr, "/posts/1/likes", Some("laoqian")).await;
    denied.assert_denied("1", &[("1-per-1s-burst-10", 10, 10, 0, 1)]);
    assert_eq!(post(addr, "/posts/1/likes", None).await.status, 401);
    clock.advance(Duration::from_secs(1));
    let ok = post(addr, "/posts/1/likes", Some("laoqian")).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, r#"{"liked":true,"post":1}"#);
}

#[tokio::test]
async fn the_feed_is_gcra_per_ip_with_a_burst_of_twenty() {
    let (addr, clock) = memory_server().await;
    for _ in 0..20 {
        assert_eq!(get(addr, "/feed").await.status, 200);
    }
    assert_the_feed_refills_in_600_ms(&clock, async || get(addr, "/feed").await).await;
}

#[tokio::test]
async fn five_spellings_of_one_user_share_its_five_failed_logins() {
    let (addr, _clock) = memory_server().await;
    let login = |from: u8, user: &str, password: &str| {
        let body = serde_json::json!({ "user": user, "password": password }).to_string();
        async move {
            let headers: [(&str, &[u8]); 1] = [("content-type", b"application/json")];
            let from = IpAddr::from([127, 0, 0, from]);
            send_from(from, addr, "POST", "/login", &headers, body.as_bytes())
                .await
                .unwrap()
        }
    };
    // Each failure from its own address: the per-address limit (5 a
    // minute) stays out of it, only the per-user one can deny.
    let spellings = [
        "alice",
        "Alice",
        " alice",
        "\u{ff41}\u{ff4c}\u{ff49}\u{ff43}\u{ff45}",
        "ALICE",
    ];
    for (from, user) in (10..).zip(spellings) {
        let failed = login(from, user, "wrong").await;
        assert_eq!(failed.status, 401, "{user:?}: {failed:#?}");
    }
    // The user's limit denies; the address's (each address's first
    // request, a 429 counting as a failure) has 4 left.
    let denied = [("5-per-900s", 5, 900, 0, 900), ("5-per-60s", 5, 60, 4, 60)];
    for (from, user) in (20..).zip(spellings) {
        login(from, user, "let-me-in")
            .await
            .assert_denied("900", &denied);
    }
    // josé, precomposed and decomposed: one user too.
    for (from, user) in (30..).zip(["jos\u{e9}", "jose\u{301}"].repeat(3)).take(5) {
        assert_eq!(login(from, user, "wrong").await.status, 401, "{user:?}");
    }
    login(40, "JOSE\u{301}", "let-me-in")
        .await
        .assert_denied("900", &denied);
    // Another user, from an address that failed: served.
    assert_eq!(login(10, "bob", "let-me-in").await.status, 200);
}

#[tokio::test]
async fn health_is_not_limited() {
    let (addr, _clock) = memory_server().await;
    for _ in 0..50 {
        let ok = get(addr, "/health").await;
        assert_eq!(ok.status, 200);
        assert!(!ok.headers.contains_key("ratelimit"));
    }
}

#[tokio::test]
async fn the_server_stops_gracefully_on_sigterm() {
    let mut server = limiter_tests::UgcServer::start(&[]);
    assert_eq!(get(server.addr(), "/health").await.status, 200);
    let status = server.terminate(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}"
    );
}
