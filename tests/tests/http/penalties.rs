//! Penalties: denials that earn blocks, escalating on repeat offences (the
//! stores against the model, `PenaltyState`, are in the conformance suite's
//! `penalties` check). The UGC server's replies (3 denials within 10 min: 15 min, then
//! 1 h) over HTTP on the memory store (time moved by hand) and on Redis
//! with two instances.

use std::net::SocketAddr;
use std::time::Duration;

use limiter_tests::http::Response;
use limiter_tests::redis;
use limiter_tests::ugc::{memory_server, redis_server, reply};
use serde_json::Value;

fn assert_rate_denied(response: &Response) {
    assert_eq!(response.status, 429, "{response:#?}");
    assert!(response.headers.contains_key("ratelimit"), "{response:#?}");
}

fn assert_blocked(response: &Response, retry_after: &str) {
    assert_eq!(response.status, 429, "{response:#?}");
    assert_eq!(response.header("retry-after"), retry_after, "{response:#?}");
    let problem: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(problem["type"], limiter_tower::BLOCKED);
}

/// Uses up the 5 replies a minute, then is denied 3 times: the third denial
/// earns the block.
async fn offend(addr: SocketAddr, user: &str) {
    for i in 0..5 {
        assert_eq!(reply(addr, user).await.status, 201, "reply {i}");
    }
    for _ in 0..3 {
        assert_rate_denied(&reply(addr, user).await);
    }
}

#[tokio::test]
async fn three_denials_block_for_15_minutes_then_an_hour_on_memory() {
    let (addr, clock) = memory_server().await;
    // Two denials are not enough.
    for _ in 0..5 {
        assert_eq!(reply(addr, "erin").await.status, 201);
    }
    for _ in 0..2 {
        assert_rate_denied(&reply(addr, "erin").await);
    }
    clock.advance(Duration::from_secs(601));
    // The two left the 10 minutes: three more are needed.
    offend(addr, "frank").await;
    assert_blocked(&reply(addr, "frank").await, "900");
    assert_eq!(reply(addr, "erin").await.status, 201);
    assert_eq!(reply(addr, "erin").await.status, 201);
    clock.advance(Duration::from_millis(899_500));
    assert_blocked(&reply(addr, "frank").await, "1");
    clock.advance(Duration::from_millis(500));
    // Free again; offending within 10 minutes of the block's end: an hour.
    offend(addr, "frank").await;
    assert_blocked(&reply(addr, "frank").await, "3600");
    clock.advance(Duration::from_secs(3_600 + 601));
    // Clean for more than 10 minutes after: 15 minutes again.
    offend(addr, "frank").await;
    assert_blocked(&reply(addr, "frank").await, "900");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_penalty_earned_on_one_instance_blocks_on_the_other() {
    let redis = redis();
    let (a, b) = (redis_server(&redis).await, redis_server(&redis).await);
    for i in 0..5 {
        assert_eq!(reply(a, "gina").await.status, 201, "reply {i}");
    }
    // Denials on both instances count together.
    assert_rate_denied(&reply(a, "gina").await);
    assert_rate_denied(&reply(b, "gina").await);
    assert_rate_denied(&reply(a, "gina").await);
    assert_blocked(&reply(b, "gina").await, "900");
    assert_blocked(&reply(a, "gina").await, "900");
}
