//! Guessing the admin token is throttled per client address: after 10
//! failed authentications (401) within 60 s from one address, that
//! address's admin requests get 429 until the window frees, the right token
//! included; other addresses are not affected, requests with the right
//! token never count, and a path that is no admin route (404) is no
//! failure. Against the real `ugc` binary on the memory store (real time:
//! each check sends its requests well within the window) and two of them
//! sharing one Redis; the window's end in process, its clock moved by hand.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use limiter_examples::admin::{AdminToken, FAILURE_WINDOW, MAX_FAILURES};
use limiter_examples::{Options, app};
use limiter_tests::http::{Response, send_from, serve};
use limiter_tests::{RedisServer, UgcServer};
use limiter_tower::{Limiter, ManualClock, MemoryStore};

const TOKEN: &str = "throttle-Admin.token~42";
const WRONG: &str = "not-the-token";
const T0: Duration = Duration::from_secs(1_750_000_000);
/// The plan `free`: searches per 60 s.
const FREE: usize = 10;

/// The throttle's 429 fields: (name, q, w, r, t).
const THROTTLED_NOW: (&str, i64, i64, i64, i64) = ("10-per-60s", 10, 60, 0, 60);

fn loopback(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// `PUT /admin/plans/{key}` with the body `pro`, sent from `from` with the
/// bearer `token` (none: no `Authorization`) and `headers`.
async fn put_plan(
    from: IpAddr,
    addr: SocketAddr,
    key: &str,
    token: Option<&str>,
    headers: &[(&str, &[u8])],
) -> Response {
    let authorization = token.map(|token| format!("Bearer {token}").into_bytes());
    let mut all = headers.to_vec();
    if let Some(authorization) = &authorization {
        all.push(("authorization", authorization));
    }
    let path = format!("/admin/plans/{key}");
    send_from(from, addr, "PUT", &path, &all, b"pro")
        .await
        .unwrap()
}

/// Sends `count` searches with `key`: how many passed (the others 429).
async fn searches_passed(addr: SocketAddr, key: &str, count: usize) -> usize {
    let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
    let mut passed = 0;
    for _ in 0..count {
        let response = send_from(loopback(9), addr, "GET", "/search", &headers, b"")
            .await
            .unwrap();
        match response.status {
            200 => passed += 1,
            429 => {}
            other => panic!("search answered {other}: {response:#?}"),
        }
    }
    passed
}

#[test]
fn the_throttle_is_10_failures_within_60_seconds() {
    assert_eq!(
        (MAX_FAILURES, FAILURE_WINDOW),
        (10, Duration::from_secs(60))
    );
}

#[tokio::test]
async fn ten_failures_throttle_their_address_and_no_other_on_the_ugc_binary() {
    let server = UgcServer::start(&[("LIMITER_ADMIN_TOKEN", TOKEN)]);
    let addr = server.addr();
    let (guesser, admin) = (loopback(2), loopback(3));

    // Paths that are no admin route answer 404 and count nothing.
    for _ in 0..15 {
        let response = send_from(admin, addr, "PUT", "/admin/nothing/k", &[], b"pro")
            .await
            .unwrap();
        assert_eq!(response.status, 404, "{response:#?}");
    }
    for i in 1..MAX_FAILURES {
        let wrong = put_plan(guesser, addr, "k1", Some(WRONG), &[]).await;
        assert_eq!(wrong.status, 401, "failure {i}: {wrong:#?}");
    }
    // The right token, however answered, never counts: 9 failures still.
    for key in ["k1", "k2", "k3"] {
        let right = put_plan(guesser, addr, key, Some(TOKEN), &[]).await;
        assert_eq!(right.status, 200, "{key}: {right:#?}");
    }
    let bad_body = send_from(
        guesser,
        addr,
        "PUT",
        "/admin/plans/k4",
        &[("authorization", format!("Bearer {TOKEN}").as_bytes())],
        b"gold",
    )
    .await
    .unwrap();
    assert_eq!(bad_body.status, 400, "{bad_body:#?}");
    // No Authorization at all is a failure too: the 10th.
    let missing = put_plan(guesser, addr, "k1", None, &[]).await;
    assert_eq!(missing.status, 401, "{missing:#?}");

    // The 11th request, with the right token: 429 before its token is read.
    let throttled = put_plan(guesser, addr, "k5", Some(TOKEN), &[]).await;
    throttled.assert_denied("60", &[THROTTLED_NOW]);
    let wrong = put_plan(guesser, addr, "k5", Some(WRONG), &[]).await;
    wrong.assert_denied("60", &[THROTTLED_NOW]);
    // Its plan was not set: k5 is still free.
    assert_eq!(searches_passed(addr, "k5", FREE + 1).await, FREE);

    // Another address: served, and its own failures are its own.
    let right = put_plan(admin, addr, "k6", Some(TOKEN), &[]).await;
    assert_eq!(right.status, 200, "{right:#?}");
    let wrong = put_plan(admin, addr, "k6", Some(WRONG), &[]).await;
    assert_eq!(wrong.status, 401, "{wrong:#?}");
    assert_eq!(server.logged(TOKEN), 0, "the token is never logged");
}

#[tokio::test]
async fn the_window_frees_and_the_client_is_found_through_the_trusted_proxy() {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    let options = Options {
        trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        admin_token: Some(AdminToken::new(TOKEN).unwrap()),
        ..Options::default()
    };
    let addr = serve(app(limiter, options)).await;
    let proxy = loopback(1);
    let client = |address: &'static str| -> [(&'static str, &'static [u8]); 1] {
        [("x-forwarded-for", address.as_bytes())]
    };
    let guesser = client("198.51.100.7");

    for i in 0..MAX_FAILURES {
        let wrong = put_plan(proxy, addr, "k1", Some(WRONG), &guesser).await;
        assert_eq!(wrong.status, 401, "failure {i}: {wrong:#?}");
    }
    clock.advance(Duration::from_secs(30));
    put_plan(proxy, addr, "k1", Some(TOKEN), &guesser)
        .await
        .assert_denied("30", &[("10-per-60s", 10, 60, 0, 30)]);
    // Another client behind the same proxy is not affected.
    let other = put_plan(proxy, addr, "k1", Some(TOKEN), &client("198.51.100.8")).await;
    assert_eq!(other.status, 200, "{other:#?}");
    // From a peer that is no trusted proxy the header is not believed: that
    // peer is the client, and it has no failures.
    let untrusted = put_plan(loopback(2), addr, "k1", Some(TOKEN), &guesser).await;
    assert_eq!(untrusted.status, 200, "{untrusted:#?}");

    clock.advance(Duration::from_secs(29));
    put_plan(proxy, addr, "k1", Some(TOKEN), &guesser)
        .await
        .assert_denied("1", &[("10-per-60s", 10, 60, 0, 1)]);
    // 60 s after the failures they have left the window.
    clock.advance(Duration::from_secs(1));
    let freed = put_plan(proxy, addr, "k1", Some(TOKEN), &guesser).await;
    assert_eq!(freed.status, 200, "{freed:#?}");
    for i in 0..MAX_FAILURES {
        let wrong = put_plan(proxy, addr, "k1", Some(WRONG), &guesser).await;
        assert_eq!(
            wrong.status, 401,
            "failure {i} after the window: {wrong:#?}"
        );
    }
    put_plan(proxy, addr, "k1", Some(TOKEN), &guesser)
        .await
        .assert_denied("60", &[THROTTLED_NOW]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ugc_instances_on_one_redis_share_the_count() {
    // A Redis of this test's own: the binary's keys have no test prefix.
    let redis = RedisServer::start();
    let url = redis.url();
    let env = [
        ("REDIS_URL", url.as_str()),
        ("LIMITER_ADMIN_TOKEN", TOKEN),
        // Shared counting is checked here, not the fallback of a loaded machine.
        ("LIMITER_STORE_DEADLINE_MS", "5000"),
    ];
    let instances = [UgcServer::start(&env), UgcServer::start(&env)];
    let guesser = loopback(2);
    // Five failures on each: neither instance saw ten of its own.
    for i in 0..MAX_FAILURES as usize {
        let addr = instances[i % 2].addr();
        let wrong = put_plan(guesser, addr, "k1", Some(WRONG), &[]).await;
        assert_eq!(wrong.status, 401, "failure {i}: {wrong:#?}");
    }
    for instance in &instances {
        put_plan(guesser, instance.addr(), "k1", Some(TOKEN), &[])
            .await
            .assert_denied("60", &[THROTTLED_NOW]);
        let other = put_plan(loopback(3), instance.addr(), "k1", Some(TOKEN), &[]).await;
        assert_eq!(other.status, 200, "{other:#?}");
    }
}
