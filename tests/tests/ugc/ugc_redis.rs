//! The HTTP layer on Redis: exact counts and fields over real HTTP, waiting
//! out Retry-After on a short-window server, and two server processes
//! sharing one Redis.

use limiter_examples::{Options, app};
use limiter_tests::UgcServer;
use limiter_tests::http::{send, serve, status_of};
use limiter_tests::ugc::assert_a_second_post_is_a_duplicate;
use std::time::Duration;

use limiter_tower::{GuardConfig, Limiter, rate_limit};

#[tokio::test]
async fn every_route_on_redis_allows_exactly_its_limit_with_exact_fields() {
    let redis = limiter_tests::redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    // A generous deadline: exact shared counting is what this test checks.
    let guard = GuardConfig {
        deadline: Duration::from_secs(5),
        ..GuardConfig::default()
    };
    let addr = serve(app(
        limiter,
        Options {
            guard,
            ..Options::default()
        },
    ))
    .await;
    let user: &[(&str, &[u8])] = &[("x-user-id", b"laoqian")];
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(status_of(addr, "POST", "/posts/1/replies", user).await);
    }
    assert_eq!(statuses, [201, 201, 201, 201, 201, 429, 429]);
    // Redis's clock moves on during the test: a few ms, rounded up to the same seconds.
    let denied = send(addr, "POST", "/posts/1/replies", user, b"")
        .await
        .unwrap();
    denied.assert_denied("60", &[("5-per-60s", 5, 60, 0, 60)]);
    // That was the third denial within 10 minutes: blocked for 15.
    let blocked = send(addr, "POST", "/posts/1/replies", user, b"")
        .await
        .unwrap();
    assert_eq!(
        (blocked.status, blocked.header("retry-after")),
        (429, "900")
    );
    let other: &[(&str, &[u8])] = &[("x-user-id", b"xiaoming")];
    assert_eq!(
        status_of(addr, "POST", "/posts/1/replies", other).await,
        201
    );

    // Posts: the duplicate rule answers first.
    assert_a_second_post_is_a_duplicate(addr).await;

    // Likes: a bucket of 10 (another user's: laoqian is blocked on every
    // limit).
    for _ in 0..10 {
        assert_eq!(status_of(addr, "POST", "/posts/1/likes", other).await, 200);
    }
    let empty = send(addr, "POST", "/posts/1/likes", other, b"")
        .await
        .unwrap();
    empty.assert_denied("1", &[("1-per-1s-burst-10", 10, 10, 0, 1)]);

    // Feed: 20 at once.
    for _ in 0..20 {
        assert_eq!(status_of(addr, "GET", "/feed", &[]).await, 200);
    }
    let burst = send(addr, "GET", "/feed", &[], b"").await.unwrap();
    burst.assert_denied("1", &[("100-per-60s-burst-20", 20, 12, 0, 1)]);
}

/// A test-only handler with a one-second window, to wait out Retry-After.
#[rate_limit(rules = [(2, 1s)], by = global)]
async fn brief() -> &'static str {
    "ok"
}

#[tokio::test]
async fn after_waiting_retry_after_the_next_request_passes_on_redis() {
    let redis = limiter_tests::redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let router = axum::Router::new()
        .route("/brief", axum::routing::get(brief))
        .layer(limiter_tower::LimiterLayer::new(limiter));
    let addr = serve(router).await;
    assert_eq!(status_of(addr, "GET", "/brief", &[]).await, 200);
    assert_eq!(status_of(addr, "GET", "/brief", &[]).await, 200);
    let denied = send(addr, "GET", "/brief", &[], b"").await.unwrap();
    assert_eq!(denied.status, 429);
    let wait: u64 = denied.header("retry-after").parse().unwrap();
    assert_eq!(wait, 1);
    tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    assert_eq!(status_of(addr, "GET", "/brief", &[]).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_server_processes_sharing_redis_allow_exactly_five_replies() {
    let redis = limiter_tests::redis();
    let servers = UgcServer::two_on_redis(redis.url());
    let user = format!("{}-laoqian", redis.prefix());
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..200 {
        let (addr, user) = (servers[i % 2].addr(), user.clone());
        requests.spawn(async move {
            let headers: &[(&str, &[u8])] = &[("x-user-id", user.as_bytes())];
            status_of(addr, "POST", "/posts/1/replies", headers).await
        });
    }
    let statuses = requests.join_all().await;
    assert_eq!(statuses.iter().filter(|&&s| s == 201).count(), 5);
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 195);
}

/// Two example servers behind Sentinel (`REDIS_SENTINELS`): after a
/// failover, an override set through one of them, on the new primary,
/// reaches the other within 2 s; so does its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_behind_sentinel_follow_a_failover() {
    use limiter_tests::RedisSentinel;
    use limiter_tests::eventually::until;
    use std::time::Instant;

    const TOKEN: &str = "sentinel-admin-token";
    let deployment = RedisSentinel::start(1);
    let sentinels = deployment.sentinel_urls().join(",");
    let env = [
        ("REDIS_SENTINELS", sentinels.as_str()),
        ("REDIS_SENTINEL_SERVICE", RedisSentinel::SERVICE),
        ("LIMITER_ADMIN_TOKEN", TOKEN),
        ("LIMITER_STORE_DEADLINE_MS", "2000"),
    ];
    let servers = [UgcServer::start(&env), UgcServer::start(&env)];
    let (a, b) = (servers[0].addr(), servers[1].addr());
    let bearer = format!("Bearer {TOKEN}");
    let admin = [("authorization", bearer.as_bytes())];
    let json = [
        ("authorization", bearer.as_bytes()),
        ("content-type", b"application/json".as_slice()),
    ];
    let overrides = async |addr| {
        let listed = send(addr, "GET", "/admin/overrides", &admin, b"")
            .await
            .unwrap();
        assert_eq!(listed.status, 200, "{listed:#?}");
        listed.body
    };
    // Both subscribed to the notices: each has read the (empty) tables.
    for addr in [a, b] {
        assert_eq!(status_of(addr, "GET", "/feed", &[]).await, 200);
        assert_eq!(overrides(addr).await, "[]");
    }

    deployment.sentinels[0].command(&["SENTINEL", "FAILOVER", RedisSentinel::SERVICE]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.named_primary() != Some(1) {
        assert!(Instant::now() < deadline, "no failover within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = br#"{"rules": [[1, "60s"]], "seconds": 600}"#;
    let path = "/admin/overrides/posts-create_post";
    for (method, listed) in [("PUT", true), ("DELETE", false)] {
        // The first calls may meet the old primary, now refusing writes.
        let made = loop {
            let sent = send(a, method, path, &json, if listed { body } else { b"" }).await;
            if sent.is_ok_and(|response| response.status == 204) {
                break Instant::now();
            }
            assert!(Instant::now() < deadline, "{method} never answered 204");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let what = || format!("{method}: b did not follow within 2 s");
        until(
            made,
            Duration::from_secs(2),
            Duration::from_millis(20),
            what,
            async || overrides(b).await.contains("posts-create_post") == listed,
        )
        .await;
    }
}
