//! The UGC server process with `LIMITER_ALLOW` and `LIMITER_SHADOW`, on the
//! memory store and on Redis: allow lists from the peer and through
//! trusted proxies (a forged header buys nothing), shadow mode counting
//! exactly what it would have denied.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use limiter_tests::http::{Response, send_from};
use limiter_tests::{RedisServer, UgcServer, ugc_start_up_error};

const ALLOWED: &str = "127.0.0.2";
const OTHER: &str = "127.0.0.3";

async fn reply(app: &UgcServer, from: &str, headers: &[(&str, &[u8])]) -> Response {
    reply_as("laoqian", app, from, headers).await
}

async fn reply_as(user: &str, app: &UgcServer, from: &str, headers: &[(&str, &[u8])]) -> Response {
    let mut headers = headers.to_vec();
    headers.push(("x-user-id", user.as_bytes()));
    let from: IpAddr = from.parse().unwrap();
    send_from(from, app.addr(), "POST", "/posts/1/replies", &headers, b"")
        .await
        .unwrap()
}

/// `env`, and `REDIS_URL` when `redis` is given.
fn env<'a>(redis: Option<&'a str>, env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = env.to_vec();
    if let Some(url) = redis {
        all.push(("REDIS_URL", url));
        all.push(("LIMITER_STORE_DEADLINE_MS", "5000"));
    }
    all
}

async fn allow_list_follows_the_resolved_client(redis: Option<&str>) {
    let app = UgcServer::start(&env(redis, &[("LIMITER_ALLOW", "127.0.0.2/32")]));
    for _ in 0..8 {
        let allowed = reply(&app, ALLOWED, &[]).await;
        assert_eq!(allowed.status, 201);
        assert!(!allowed.headers.contains_key("ratelimit"), "{allowed:#?}");
    }
    // The peer is not a trusted proxy: its forged header is ignored, and the
    // user's 5 replies a minute hold it.
    let forged: [(&str, &[u8]); 1] = [("x-forwarded-for", ALLOWED.as_bytes())];
    for _ in 0..5 {
        assert_eq!(reply(&app, OTHER, &forged).await.status, 201);
    }
    assert_eq!(reply(&app, OTHER, &forged).await.status, 429);
    assert_eq!(reply(&app, ALLOWED, &[]).await.status, 201);

    // Behind a trusted proxy, the forwarded client is the one looked up.
    let proxied = UgcServer::start(&env(
        redis,
        &[
            ("LIMITER_ALLOW", "127.0.0.2/32"),
            ("LIMITER_TRUSTED_PROXIES", "127.0.0.1"),
        ],
    ));
    let proxied = &proxied;
    let via_proxy = |client: &'static str| async move {
        let header: [(&str, &[u8]); 1] = [("x-forwarded-for", client.as_bytes())];
        // Another user than above: on Redis both servers share the counts.
        reply_as("xiaoming", proxied, "127.0.0.1", &header)
            .await
            .status
    };
    for _ in 0..8 {
        assert_eq!(via_proxy(ALLOWED).await, 201);
    }
    // A client that writes the allowed address left of its own gets no bypass.
    let forged_left = "127.0.0.2, 127.0.0.9";
    for _ in 0..5 {
        assert_eq!(via_proxy(forged_left).await, 201);
    }
    assert_eq!(via_proxy(forged_left).await, 429);
    let metrics = metrics(proxied).await;
    assert!(
        metrics.contains(
            "limiter_decisions_total{outcome=\"bypassed\",source=\"allow_list\",algorithm=\"sliding_log\",limit=\"posts-create_reply\",override=\"false\"} 8"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn allowed_clients_bypass_every_limit_on_memory_and_on_redis() {
    allow_list_follows_the_resolved_client(None).await;
    let redis = RedisServer::start();
    allow_list_follows_the_resolved_client(Some(&redis.url())).await;
}

async fn metrics(app: &UgcServer) -> String {
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    send_from(local, app.addr(), "GET", "/metrics", &[], b"")
        .await
        .unwrap()
        .body
}

async fn shadow_mode_counts_what_it_would_deny(redis: Option<&str>) {
    let app = UgcServer::start(&env(redis, &[("LIMITER_SHADOW", "1")]));
    for remaining in [4, 3, 2, 1, 0, 0, 0, 0] {
        let response = reply(&app, OTHER, &[]).await;
        assert_eq!(response.status, 201);
        assert_eq!(
            response.header("ratelimit"),
            format!("\"5-per-60s\";r={remaining};t=60")
        );
    }
    let metrics = metrics(&app).await;
    let shadow =
        "limiter_shadow_denied_total{algorithm=\"sliding_log\",limit=\"posts-create_reply\"} 3";
    assert!(metrics.contains(shadow), "{metrics}");
    // Each one logged once.
    let line = "shadow mode: would have been rate limited";
    let deadline = Instant::now() + Duration::from_secs(5);
    while app.logged(line) < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(app.logged(line), 3);
}

#[tokio::test]
async fn shadow_mode_counts_exactly_what_it_would_deny_on_memory_and_on_redis() {
    shadow_mode_counts_what_it_would_deny(None).await;
    let redis = RedisServer::start();
    shadow_mode_counts_what_it_would_deny(Some(&redis.url())).await;
}

#[test]
fn malformed_allow_and_shadow_settings_stop_the_server() {
    let log = ugc_start_up_error(&[("LIMITER_ALLOW", "10.0.0.0/33")]);
    assert!(log.contains("LIMITER_ALLOW"), "{log}");
    let log = ugc_start_up_error(&[("LIMITER_SHADOW", "yes")]);
    assert!(
        log.contains("LIMITER_SHADOW \"yes\": expected 1 or 0"),
        "{log}"
    );
}
