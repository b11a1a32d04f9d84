//! A public client mints penalty blocks with made-up user ids (issue 31):
//! against the real `ugc` binary with `LIMITER_MAX_BLOCKS=20`, 60 made-up
//! users each earn a block on `POST /posts/1/replies` (5 allowed, 3
//! denials); then a fresh offender is still blocked, the operator's block
//! set before the flood still holds, and the first made-up users' blocks
//! gave way (they ended soonest). On the memory store and on Redis.
//!
//! The operator's block goes through the admin routes by identity kind
//! (`PUT /admin/blocks/user/victim`, `GET /admin/blocks/user/victim`).

use std::net::SocketAddr;

use limiter_tests::http::{Response, send};
use limiter_tests::{RedisServer, UgcServer};
use serde_json::Value;

const TOKEN: &str = "penalty-flood-admin-token";
const MAX_BLOCKS: usize = 20;
const FLOOD: usize = 60;

fn bearer() -> Vec<u8> {
    format!("Bearer {TOKEN}").into_bytes()
}

async fn reply(addr: SocketAddr, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    send(addr, "POST", "/posts/1/replies", &headers, b"")
        .await
        .unwrap()
}

/// Uses up the 5 replies a minute, then is denied 3 times: the third denial
/// earns the block.
async fn offend(addr: SocketAddr, user: &str) {
    for i in 0..5 {
        assert_eq!(reply(addr, user).await.status, 201, "{user}: reply {i}");
    }
    for i in 0..3 {
        let denied = reply(addr, user).await;
        assert_eq!(denied.status, 429, "{user}: denial {i}: {denied:#?}");
        assert!(denied.headers.contains_key("ratelimit"), "{denied:#?}");
    }
}

fn is_blocked(response: &Response) -> bool {
    response.status == 429
        && serde_json::from_str::<Value>(&response.body)
            .is_ok_and(|problem| problem["type"] == limiter_tower::BLOCKED)
}

async fn flood_then_check(server: &UgcServer) {
    let addr = server.addr();
    let authorization = bearer();
    let admin: [(&str, &[u8]); 1] = [("authorization", &authorization)];
    let set = send(
        addr,
        "PUT",
        "/admin/blocks/user/victim",
        &admin,
        br#"{"seconds": 900}"#,
    )
    .await
    .unwrap();
    assert_eq!(set.status, 204, "{set:#?}");

    for i in 0..FLOOD {
        offend(addr, &format!("made-up-{i:03}")).await;
    }
    // The last blocks of the flood hold; the first ones gave way.
    let last = reply(addr, &format!("made-up-{:03}", FLOOD - 1)).await;
    assert!(is_blocked(&last), "{last:#?}");
    let first = reply(addr, "made-up-000").await;
    assert_eq!(first.status, 429, "{first:#?}");
    assert!(!is_blocked(&first), "{first:#?}");
    assert!(first.headers.contains_key("ratelimit"), "{first:#?}");

    // A fresh offender is blocked.
    offend(addr, "fresh-offender").await;
    let fresh = reply(addr, "fresh-offender").await;
    assert!(is_blocked(&fresh), "{fresh:#?}");

    // The operator's block survived the flood.
    let victim = reply(addr, "victim").await;
    assert!(is_blocked(&victim), "{victim:#?}");
    let read = send(addr, "GET", "/admin/blocks/user/victim", &admin, b"")
        .await
        .unwrap();
    assert_eq!(read.status, 200, "{read:#?}");
    let left: Value = serde_json::from_str(&read.body).unwrap();
    let seconds = left["seconds"].as_u64().unwrap();
    assert!((1..=900).contains(&seconds), "{read:#?}");
}

#[tokio::test]
async fn a_flood_of_penalty_blocks_in_memory_keeps_the_bound_and_blocks_the_next_offender() {
    let max_blocks = MAX_BLOCKS.to_string();
    let server = UgcServer::start(&[
        ("LIMITER_MAX_BLOCKS", &max_blocks),
        ("LIMITER_ADMIN_TOKEN", TOKEN),
    ]);
    flood_then_check(&server).await;
}

#[tokio::test]
async fn a_flood_of_penalty_blocks_on_redis_keeps_the_bound_and_blocks_the_next_offender() {
    // A server of its own: the blocks live under fixed names, which a
    // shared server (REDIS_URL) would mix with other tests'.
    let redis = RedisServer::start();
    let url = redis.url();
    let max_blocks = MAX_BLOCKS.to_string();
    let server = UgcServer::start(&[
        ("REDIS_URL", &url),
        ("LIMITER_STORE_DEADLINE_MS", "5000"),
        ("LIMITER_MAX_BLOCKS", &max_blocks),
        ("LIMITER_ADMIN_TOKEN", TOKEN),
    ]);
    flood_then_check(&server).await;
    let held = redis.command(&["ZCARD", "{limiter:resets}:penalty_blocks"]);
    assert_eq!(held.trim(), MAX_BLOCKS.to_string());
}

#[test]
fn a_bad_limiter_max_blocks_stops_the_server_naming_it() {
    for bad in ["0", "-3", "many", ""] {
        let error = limiter_tests::ugc_start_up_error(&[("LIMITER_MAX_BLOCKS", bad)]);
        assert!(error.contains("LIMITER_MAX_BLOCKS"), "{bad:?}: {error}");
    }
}
