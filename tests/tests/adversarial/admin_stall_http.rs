//! An operator's change answered 503 "not confirmed" lands on every
//! instance or on none within 2 s of Redis answering again (issue 31), end
//! to end: real `ugc` processes sharing one Redis. Redis hangs (SIGSTOP)
//! while instance A is asked, at once, to block the user `victim` for
//! 600 s and to give the API key `k1` the plan `pro`; each answers 503
//! saying the change was not confirmed, and A applies neither itself.
//!
//! - Sent from an address on the allow list (`LIMITER_ALLOW`: no admin
//!   throttle), both changes go out on A's live connection and run late
//!   when Redis resumes (SIGCONT): within 2 s, A and B answer the block
//!   200 and block the victim's replies, `k1` searches under `pro`, and an
//!   instance C started afterwards agrees.
//! - When Redis is killed and restarted empty instead, they never run: A,
//!   B and a new C answer 404 and let the victim reply, and still do once
//!   each has read the new server's blocks.
//! - Behind the admin throttle, each change follows its request's
//!   throttle check on the same store, which the hung Redis does not
//!   answer: the fallback admits the request, and the change is refused at
//!   once (503, nothing changed) instead of waiting out a second deadline.
//!   Neither reaches Redis, and every instance agrees on no block and the
//!   plan `free`.

use std::time::{Duration, Instant};

use limiter_tests::RedisServer;
use limiter_tests::eventually::{assert_found_within, first_true, warmed};
use limiter_tests::http::Response;
use serde_json::Value;

const TOKEN: &str = "admin-stall-http-token";
/// The deadline of one Redis call: what each call of a request (a throttle
/// check, a change) answers within while Redis hangs.
const DEADLINE_MS: &str = "500";
/// The promise: in effect on every instance or on none within 2 s of
/// Redis answering again.
const BOUND: Duration = Duration::from_secs(2);

/// Where the admin requests come from (`instance::admin_address`); the users'
/// requests come from 127.0.0.1, outside it.
const ADMIN_NETWORK: &str = "127.1.0.0/16";
const VICTIM: &str = "victim";
/// The block the operator asks for, in seconds.
const BLOCK_SECONDS: u64 = 600;
/// The API key whose plan the operator changes.
const PLANNED: &str = "k1";
/// Searches a minute under the plans `free` and `pro`.
const FREE: i64 = 10;
const PRO: i64 = 100;
/// The hashes the Redis store keeps the operator's blocks and plans in,
/// each field an identity's key.
const BLOCKS: &str = "{limiter:resets}:blocks";
const PLANS: &str = "{limiter:resets}:plans";
/// The field of [`VICTIM`]'s block, and of [`PLANNED`]'s plan.
const VICTIM_KEY: &str = "rate_limit:user=victim";
const PLANNED_KEY: &str = "rate_limit:header.x-api-key=k1";

#[path = "admin_stall_http/instance.rs"]
mod instance;
use instance::{Admins, Instance};

/// A block and an unblock made on A reach B, and A assigns a plan and
/// takes it back: every admin script is loaded on Redis (a script Redis
/// lacks answers NOSCRIPT, which runs nothing: there would be no late
/// write to see) and both instances have subscribed. The victim replies
/// on both: nothing blocks it yet.
async fn warm_up(a: &Instance, b: &Instance) {
    let set = a.block("warm", 60).await;
    assert_eq!(set.status, 204, "{set:#?}");
    warmed("B reads A's block", async || {
        b.blocked("warm").await.is_some()
    })
    .await;
    let unset = a.admin("DELETE", "/admin/blocks/user/warm", "").await;
    assert_eq!(unset.status, 204, "{unset:#?}");
    warmed("B reads A's unblock", async || {
        b.blocked("warm").await.is_none()
    })
    .await;
    for plan in ["pro", "free"] {
        let assigned = a.assign("warm", plan).await;
        assert_eq!(assigned.status, 200, "{plan}: {assigned:#?}");
    }
    for (name, instance) in [("A", a), ("B", b)] {
        instance.assert_victim_free(name).await;
        assert_eq!(instance.searches_a_minute(PLANNED).await, FREE, "{name}");
    }
}

/// While Redis hangs, A's block of the victim and plan for `k1`, sent at
/// once, answer 503 saying they were not confirmed, and A applies neither
/// itself.
async fn change_while_hung(a: &Instance) {
    let (block, plan) = tokio::join!(a.block(VICTIM, BLOCK_SECONDS), a.assign(PLANNED, "pro"));
    assert_not_confirmed(a, &block, &plan).await;
}

/// Both changes answered 503 "not confirmed", and A applies neither.
async fn assert_not_confirmed(a: &Instance, block: &Response, plan: &Response) {
    assert_eq!(block.status, 503, "{block:#?}");
    assert_eq!(
        block.header("content-type"),
        "application/problem+json",
        "{block:#?}"
    );
    let problem: Value = serde_json::from_str(&block.body).unwrap();
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("not confirmed"), "{block:#?}");
    assert_eq!(plan.status, 503, "{plan:#?}");
    let error: Value = serde_json::from_str(&plan.body).unwrap();
    let error = error["error"].as_str().unwrap_or_default();
    assert!(error.contains("not confirmed"), "{plan:#?}");
    assert_eq!(a.blocked(VICTIM).await, None);
}

/// A Redis, two warmed-up instances of `admins` on it, and A's changes
/// made while it hangs: it is still stopped.
async fn changed_while_hung(admins: Admins) -> (RedisServer, Instance, Instance) {
    let redis = RedisServer::start();
    let (a, b) = (
        Instance::start(&redis.url(), admins),
        Instance::start(&redis.url(), admins),
    );
    warm_up(&a, &b).await;
    redis.signal("STOP");
    match admins {
        Admins::Allowed => change_while_hung(&a).await,
        Admins::Throttled => refused_while_hung(&a).await,
    }
    (redis, a, b)
}

/// Behind the throttle, whose check the hung Redis does not answer (the
/// fallback admits the request), each change is refused at once: 503
/// "nothing was changed", within the one deadline its check took (and a
/// loaded machine's slack), never sent.
async fn refused_while_hung(a: &Instance) {
    let sent = Instant::now();
    let (block, plan) = tokio::join!(a.block(VICTIM, BLOCK_SECONDS), a.assign(PLANNED, "pro"));
    let took = sent.elapsed();
    let deadline = Duration::from_millis(DEADLINE_MS.parse().unwrap());
    // Sent after the check, each would have waited a second deadline.
    assert!(took < deadline * 3 / 2, "answered after {took:?}");
    for refused in [&block, &plan] {
        assert_eq!(refused.status, 503, "{refused:#?}");
        assert_eq!(refused.header("retry-after"), "1");
        assert!(refused.body.contains("nothing was changed"), "{refused:#?}");
    }
    assert_eq!(a.blocked(VICTIM).await, None);
}

/// Each of `instances` blocks the victim or not, and lets `k1` search
/// `searches` times a minute.
async fn assert_all_hold(instances: &[(&str, &Instance)], blocked: bool, searches: i64) {
    for &(name, instance) in instances {
        if blocked {
            instance.assert_victim_blocked(name).await;
        } else {
            instance.assert_victim_free(name).await;
        }
        assert_eq!(
            instance.searches_a_minute(PLANNED).await,
            searches,
            "{name}"
        );
    }
}

/// Redis's answer to `args`, trimmed. A command sent after SIGCONT comes
/// after whatever Redis had read while stopped: it sees those calls run.
fn redis_says(redis: &RedisServer, args: &[&str]) -> String {
    redis.command(args).trim().to_owned()
}

/// B blocks a user on Redis as it is now, and every one of `others` reads
/// that block: from then on each instance's answers come from what this
/// Redis holds, not from what it knew before.
async fn all_read_a_block_made_now(b: &Instance, others: &[&Instance]) {
    warmed("B blocks on Redis as it is now", async || {
        b.block("after", 60).await.status == 204
    })
    .await;
    for (i, other) in others.iter().enumerate() {
        warmed(&format!("instance {i} reads B's block"), async || {
            other.blocked("after").await.is_some()
        })
        .await;
    }
}

#[tokio::test]
async fn a_late_block_from_an_allowed_admin_holds_on_every_instance_within_two_seconds() {
    let (redis, a, b) = changed_while_hung(Admins::Allowed).await;
    redis.signal("CONT");
    let resumed = Instant::now();

    let agreed = first_true(resumed, BOUND, async || {
        a.blocked(VICTIM).await.is_some() && b.blocked(VICTIM).await.is_some()
    })
    .await;
    println!("A and B answer the block {agreed:?} after Redis resumed");
    assert_found_within(agreed, BOUND);
    // Both changes ran late; the plan with the block (both were queued on
    // one connection, which Redis reads in one go), so whoever read the
    // block read the plan.
    assert_eq!(redis_says(&redis, &["HEXISTS", BLOCKS, VICTIM_KEY]), "1");
    assert_eq!(redis_says(&redis, &["HGET", PLANS, PLANNED_KEY]), "pro");
    assert_all_hold(&[("A", &a), ("B", &b)], true, PRO).await;

    // An instance started now reads the same state.
    let c = Instance::start(&redis.url(), Admins::Allowed);
    warmed("C reads the block", async || {
        c.blocked(VICTIM).await.is_some()
    })
    .await;
    assert_all_hold(&[("A", &a), ("B", &b), ("C", &c)], true, PRO).await;
}

#[tokio::test]
async fn a_block_that_dies_with_redis_holds_nowhere() {
    let (mut redis, a, b) = changed_while_hung(Admins::Allowed).await;
    // The calls Redis had read die with it: the restarted server is empty.
    redis.restart();
    let c = Instance::start(&redis.url(), Admins::Allowed);
    // From when Redis answers again and C listens.
    let restarted = Instant::now();

    let agreed = first_true(restarted, BOUND, async || {
        a.blocked(VICTIM).await.is_none()
            && b.blocked(VICTIM).await.is_none()
            && c.blocked(VICTIM).await.is_none()
    })
    .await;
    println!("A, B and C answer no block {agreed:?} after Redis restarted");
    assert_found_within(agreed, BOUND);
    for (name, instance) in [("A", &a), ("B", &b), ("C", &c)] {
        instance.assert_victim_free(name).await;
    }

    // No stale view: the same once each has read the new server's blocks
    // (no more replies: the victim's 5 a minute are nearly used).
    all_read_a_block_made_now(&b, &[&a, &c]).await;
    for (name, instance) in [("A", &a), ("B", &b), ("C", &c)] {
        assert_eq!(instance.blocked(VICTIM).await, None, "{name}");
        assert_eq!(instance.searches_a_minute(PLANNED).await, FREE, "{name}");
    }
}

/// Behind the admin throttle, whose check the hung Redis did not answer,
/// the changes were refused at once, never sent: when Redis resumes it
/// holds neither, and every instance, a new C too, agrees: no block, the
/// plan `free`.
#[tokio::test]
async fn a_change_behind_the_admin_throttle_is_refused_at_once_and_holds_nowhere() {
    let (redis, a, b) = changed_while_hung(Admins::Throttled).await;
    redis.signal("CONT");
    assert_eq!(redis_says(&redis, &["HEXISTS", BLOCKS, VICTIM_KEY]), "0");
    assert_eq!(redis_says(&redis, &["HGET", PLANS, PLANNED_KEY]), "");
    let c = Instance::start(&redis.url(), Admins::Throttled);
    all_read_a_block_made_now(&b, &[&a, &c]).await;
    assert_all_hold(&[("A", &a), ("B", &b), ("C", &c)], false, FREE).await;
}
