//! Blocks over the UGC server's admin routes: a user, an address, on
//! one instance and honoured by another, listed a page at a time.

use crate::control::common;

use std::time::Duration;

use common::*;
use limiter_tests::http::send;
use limiter_tests::redis;
use serde_json::{Value, json};

#[tokio::test]
async fn a_blocked_user_is_denied_everywhere_until_the_block_ends_on_memory() {
    let (addr, clock) = memory_server().await;
    // Refused without the token, or with a body that is not {"seconds": N}:
    // nothing is blocked.
    assert_eq!(
        block(addr, "user/mallory", r#"{"seconds": 900}"#, None)
            .await
            .status,
        401
    );
    for body in [
        "",
        "900",
        r#"{"seconds": 0}"#,
        r#"{"seconds": -1}"#,
        r#"{"secs": 9}"#,
    ] {
        let refused = block(addr, "user/mallory", body, Some(ADMIN_TOKEN)).await;
        assert_eq!(refused.status, 400, "{body}: {refused:#?}");
    }
    assert_eq!(reply(addr, "mallory").await.status, 201);
    let path = "/admin/blocks/user/mallory";
    assert_eq!(
        admin(addr, "GET", path, Some(ADMIN_TOKEN)).await.status,
        404
    );
    let blocked = block(
        addr,
        "user/mallory",
        r#"{"seconds": 900}"#,
        Some(ADMIN_TOKEN),
    )
    .await;
    assert_eq!(blocked.status, 204, "{blocked:#?}");
    assert_eq!(admin(addr, "GET", path, None).await.status, 401);
    let read = admin(addr, "GET", path, Some(ADMIN_TOKEN)).await;
    assert_eq!(
        (read.status, read.body.as_str()),
        (200, r#"{"seconds":900}"#)
    );
    assert_blocked(&reply(addr, "mallory").await, "900");
    assert_blocked(&like(addr, "mallory").await, "900");
    assert_eq!(reply(addr, "bob").await.status, 201);
    // Blocked requests count nowhere: the replies used stay at one.
    clock.advance(Duration::from_millis(899_001));
    assert_blocked(&reply(addr, "mallory").await, "1");
    clock.advance(Duration::from_millis(999));
    assert_eq!(reply(addr, "mallory").await.status, 201);
    assert_eq!(my_limits(addr, "mallory").await[0]["remaining"], 4);
    // Lifted before its end.
    assert_eq!(
        block(
            addr,
            "user/mallory",
            r#"{"seconds": 60}"#,
            Some(ADMIN_TOKEN)
        )
        .await
        .status,
        204
    );
    assert_blocked(&reply(addr, "mallory").await, "60");
    assert_eq!(admin(addr, "DELETE", path, None).await.status, 401);
    assert_blocked(&reply(addr, "mallory").await, "60");
    assert_eq!(
        admin(addr, "DELETE", path, Some(ADMIN_TOKEN)).await.status,
        204
    );
    assert_eq!(
        admin(addr, "GET", path, Some(ADMIN_TOKEN)).await.status,
        404
    );
    assert_eq!(reply(addr, "mallory").await.status, 201);
}

#[tokio::test]
async fn a_blocked_address_is_denied_on_every_limited_route() {
    let (addr, _clock) = memory_server().await;
    let blocked = block(
        addr,
        "ip/127.0.0.1",
        r#"{"seconds": 30}"#,
        Some(ADMIN_TOKEN),
    )
    .await;
    assert_eq!(blocked.status, 204);
    let headers: [(&str, &[u8]); 0] = [];
    let post = send(addr, "POST", "/posts", &headers, b"").await.unwrap();
    assert_blocked(&post, "30");
    // A route keyed by user is denied to that client too, whoever it
    // says it is; the user is not blocked.
    assert_blocked(&reply(addr, "alice").await, "30");
    let path = "/admin/blocks/user/alice";
    assert_eq!(
        admin(addr, "GET", path, Some(ADMIN_TOKEN)).await.status,
        404
    );
    // Not limited: still served.
    let health = send(addr, "GET", "/health", &headers, b"").await.unwrap();
    assert_eq!(health.status, 200);
    // The admin routes are not covered: the operator who blocked the
    // address they work from lifts the block from it.
    let path = "/admin/blocks/ip/127.0.0.1";
    assert_eq!(
        admin(addr, "DELETE", path, Some(ADMIN_TOKEN)).await.status,
        204
    );
    let post = send(addr, "POST", "/posts", &headers, b"").await.unwrap();
    assert_eq!(post.status, 201, "{post:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_on_one_instance_is_honoured_by_the_other_at_its_next_request() {
    let redis = redis();
    let (a, b) = (redis_server(&redis).await, redis_server(&redis).await);
    let user = format!("dave-{}", redis.prefix());
    assert_eq!(reply(b, &user).await.status, 201);
    let blocked = block(
        a,
        &format!("user/{user}"),
        r#"{"seconds": 900}"#,
        Some(ADMIN_TOKEN),
    )
    .await;
    assert_eq!(blocked.status, 204, "{blocked:#?}");
    assert_blocked(&reply(b, &user).await, "900");
    assert_blocked(&reply(a, &user).await, "900");
    let path = format!("/admin/blocks/user/{user}");
    assert_eq!(
        admin(a, "DELETE", &path, Some(ADMIN_TOKEN)).await.status,
        204
    );
    assert_eq!(reply(b, &user).await.status, 201);
    // A third instance reads the blocks when it subscribes.
    assert_eq!(
        block(
            a,
            &format!("user/{user}"),
            r#"{"seconds": 600}"#,
            Some(ADMIN_TOKEN)
        )
        .await
        .status,
        204
    );
    let c = redis_server(&redis).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let answer = reply(c, &user).await;
        if answer.status == 429 {
            assert_blocked(&answer, "600");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{answer:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The blocks are listed a page at a time, in key order, each key naming
/// its identity's kind and each block its origin; the time left runs on
/// the store's clock and ended blocks are left out.
#[tokio::test]
async fn the_blocks_are_listed_a_page_at_a_time() {
    let (addr, clock) = memory_server().await;
    let token = Some(ADMIN_TOKEN);
    for (identity, seconds) in [("ip/127.0.0.9", 60), ("user/alice", 120), ("key/k-1", 5)] {
        let body = format!(r#"{{"seconds": {seconds}}}"#);
        assert_eq!(block(addr, identity, &body, token).await.status, 204);
    }
    // carol earns a penalty block: 5 replies pass, 3 denials.
    for _ in 0..8 {
        reply(addr, "carol").await;
    }
    clock.advance(Duration::from_millis(1_500));
    let page = |query: &'static str| async move {
        let response = admin(addr, "GET", query, token).await;
        assert_eq!(response.status, 200, "{response:#?}");
        serde_json::from_str::<Value>(&response.body).unwrap()
    };
    let pages = [
        (
            "/admin/blocks?limit=2",
            json!({"blocks": [
                {"key": "rate_limit:127.0.0.9", "seconds": 59, "origin": "operator"},
                {"key": "rate_limit:header.x-api-key=k-1", "seconds": 4, "origin": "operator"},
            ], "next": "rate_limit:header.x-api-key=k-1"}),
        ),
        (
            "/admin/blocks?limit=2&after=rate_limit:header.x-api-key%3Dk-1",
            json!({"blocks": [
                {"key": "rate_limit:user=alice", "seconds": 119, "origin": "operator"},
                {"key": "rate_limit:user=carol", "seconds": 899, "origin": "penalty"},
            ], "next": "rate_limit:user=carol"}),
        ),
        (
            "/admin/blocks?after=rate_limit:user=carol",
            json!({"blocks": [], "next": null}),
        ),
    ];
    for (query, expected) in pages {
        assert_eq!(page(query).await, expected, "{query}");
    }
    // The key's block ends: it is left out.
    clock.advance(Duration::from_secs(4));
    let all = page("/admin/blocks").await;
    let keys: Vec<&str> = all["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "rate_limit:127.0.0.9",
            "rate_limit:user=alice",
            "rate_limit:user=carol"
        ]
    );
    for bad in [
        "/admin/blocks?limit=0",
        "/admin/blocks?limit=1001",
        "/admin/blocks?page=2",
    ] {
        assert_eq!(admin(addr, "GET", bad, token).await.status, 400, "{bad}");
    }
    assert_eq!(admin(addr, "GET", "/admin/blocks", None).await.status, 401);
}
