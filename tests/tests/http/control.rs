//! Handles on the limits' state over the UGC server's routes: `GET
//! /me/limits` reads without counting, the admin routes read and reset any
//! identity's limits and refuse a missing or wrong token; on the memory
//! store (time moved by hand) and on Redis, two instances sharing it.

#[path = "control/common.rs"]
pub(crate) mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use limiter_tests::http::{Response, send, status_of};
use limiter_tests::redis;
use limiter_tower::{Limiter, ManualClock, MemoryStore};
use serde_json::{Value, json};

/// The replies limit's state, as `/me/limits` shows it.
fn replies(remaining: u64, allowed: bool, reset: u64, retry_after: Option<u64>) -> Value {
    let mut state = json!({
        "route": "POST /posts/{id}/replies",
        "name": "posts-create_reply",
        "kind": "user",
        "policy": "5-per-60s",
        "limit": 5,
        "allowed": allowed,
        "remaining": remaining,
        "reset": reset,
    });
    if let Some(retry) = retry_after {
        state["retry_after"] = json!(retry);
    }
    state
}

/// The failed logins per user, unused.
fn logins() -> Value {
    json!({
        "route": "POST /login",
        "name": "login-per-user",
        "kind": "user",
        "policy": "5-per-900s",
        "limit": 5,
        "allowed": true,
        "remaining": 5,
        "reset": 900,
    })
}

fn likes() -> Value {
    json!({
        "route": "POST /posts/{id}/likes",
        "name": "posts-like",
        "kind": "user",
        "policy": "1-per-1s-burst-10",
        "limit": 10,
        "allowed": true,
        "remaining": 10,
        "reset": 1,
    })
}

#[tokio::test]
async fn my_limits_read_without_counting_and_an_admin_resets_them_on_memory() {
    let (addr, clock) = memory_server().await;
    // Unused: the whole quota, and reading it twice changes nothing.
    let fresh = json!([replies(5, true, 60, None), likes(), logins()]);
    assert_eq!(my_limits(addr, "alice").await, fresh);
    assert_eq!(my_limits(addr, "alice").await, fresh);
    for i in 0..5 {
        assert_eq!(reply(addr, "alice").await.status, 201, "reply {i}");
        clock.advance(Duration::from_secs(1));
    }
    // The first reply leaves in 60 - 5 = 55 s.
    let used = json!([replies(0, false, 55, Some(55)), likes(), logins()]);
    assert_eq!(my_limits(addr, "alice").await, used);
    assert_eq!(my_limits(addr, "alice").await, used);
    assert_eq!(reply(addr, "alice").await.status, 429);
    // Another user is untouched.
    assert_eq!(my_limits(addr, "bob").await, fresh);

    // The admin routes: no token, a wrong one, another scheme: 401, and
    // nothing changed.
    let path = "/admin/limits/user/alice";
    for token in [None, Some("wrong"), Some("control-admin-tokem")] {
        assert_eq!(admin(addr, "GET", path, token).await.status, 401);
        assert_eq!(admin(addr, "DELETE", path, token).await.status, 401);
    }
    assert_eq!(reply(addr, "alice").await.status, 429);
    let read = admin(addr, "GET", path, Some(ADMIN_TOKEN)).await;
    assert_eq!(read.status, 200, "{read:#?}");
    let listed: Value = serde_json::from_str(&read.body).unwrap();
    assert_eq!(listed[0], used[0]);
    assert_eq!(
        admin(addr, "DELETE", path, Some(ADMIN_TOKEN)).await.status,
        204
    );
    assert_eq!(my_limits(addr, "alice").await, fresh);
    assert_eq!(reply(addr, "alice").await.status, 201);
}

#[tokio::test]
async fn an_identity_by_address_lists_and_resets_the_limits_by_address() {
    let (addr, _clock) = memory_server().await;
    let headers: [(&str, &[u8]); 0] = [];
    let response = send(addr, "POST", "/posts", &headers, b"").await.unwrap();
    assert_eq!(response.status, 201, "{response:#?}");
    let read = admin(addr, "GET", "/admin/limits/ip/127.0.0.1", Some(ADMIN_TOKEN)).await;
    let listed: Value = serde_json::from_str(&read.body).unwrap();
    let posts: Vec<(&Value, &Value, &Value)> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["route"] == "POST /posts")
        .map(|s| (&s["policy"], &s["remaining"], &s["allowed"]))
        .collect();
    // The next post would be a duplicate within 5 s: denied, so nothing
    // else would be counted either.
    assert_eq!(
        posts,
        [
            (&json!("10-per-60s"), &json!(9), &json!(false)),
            (&json!("20-per-120s"), &json!(19), &json!(false)),
            (&json!("1-per-5s"), &json!(0), &json!(false)),
        ],
        "{listed:#}"
    );
    // A user is not an address, even one that spells it: no limit by
    // address is its.
    for user in ["alice", "127.0.0.1"] {
        let path = format!("/admin/limits/user/{user}");
        let read = admin(addr, "GET", &path, Some(ADMIN_TOKEN)).await;
        assert_eq!(read.status, 200, "{read:#?}");
        assert!(!read.body.contains("POST /posts\""), "{}", read.body);
    }
    assert_eq!(
        admin(
            addr,
            "DELETE",
            "/admin/limits/ip/127.0.0.1",
            Some(ADMIN_TOKEN)
        )
        .await
        .status,
        204
    );
    let read = admin(addr, "GET", "/admin/limits/ip/127.0.0.1", Some(ADMIN_TOKEN)).await;
    let listed: Value = serde_json::from_str(&read.body).unwrap();
    for state in listed.as_array().unwrap() {
        assert_eq!(state["remaining"], state["limit"], "{state}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reset_on_one_instance_is_honoured_by_the_other_at_its_next_request() {
    let redis = redis();
    let (a, b) = (redis_server(&redis).await, redis_server(&redis).await);
    for i in 0..5 {
        assert_eq!(reply(b, "carol").await.status, 201, "reply {i}");
    }
    // B denies, and remembers the denial in its deny cache.
    assert_eq!(reply(b, "carol").await.status, 429);
    assert_eq!(reply(b, "carol").await.status, 429);
    let before = my_limits(a, "carol").await;
    assert_eq!(before[0]["remaining"], 0);
    assert_eq!(before, my_limits(a, "carol").await);
    let path = "/admin/limits/user/carol";
    assert_eq!(admin(a, "DELETE", path, None).await.status, 401);
    assert_eq!(
        admin(a, "DELETE", path, Some(ADMIN_TOKEN)).await.status,
        204
    );
    assert_eq!(reply(b, "carol").await.status, 201);
    assert_eq!(my_limits(a, "carol").await[0]["remaining"], 4);
}

/// A store chosen at run time, with no type named at the call site; a
/// handler that checks through the layer's store, and turns its denial
/// into the very 429 a limited route answers.
#[tokio::test]
async fn a_programmatic_denial_is_the_layers_own_429() {
    use axum::Router;
    use axum::extract::State;
    use axum::response::IntoResponse;
    use axum::routing::post;
    use limiter_tower::{
        Control, KeySource, LimitLayer, LimiterLayer, Policy, Rule, too_many_requests,
    };

    let clock = ManualClock::new(T0);
    let redis_url = std::env::var("LIMITER_TEST_NO_SUCH_VARIABLE").ok();
    let layer = match redis_url {
        Some(url) => {
            LimiterLayer::new(Limiter::new(limiter_tower::RedisStore::open(&url).unwrap()))
        }
        None => LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock.clone()))),
    };
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    async fn login(State((control, policy)): State<(Control, Policy)>) -> axum::response::Response {
        match control.check("login", &policy).await {
            Ok(decision) if decision.allowed() => "welcome".into_response(),
            Ok(decision) => too_many_requests(&decision, &policy),
            Err(error) => (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                error.to_string(),
            )
                .into_response(),
        }
    }
    let limited = LimitLayer::new("limited", policy.clone(), KeySource::global());
    let router = Router::new()
        .route("/login", post(login).with_state((layer.control(), policy)))
        .route("/limited", post(|| async { "ok" }).layer(limited))
        .layer(layer);
    let addr = limiter_tests::http::serve(router).await;
    for path in ["/login", "/limited"] {
        assert_eq!(status_of(addr, "POST", path, &[]).await, 200);
    }
    clock.advance(Duration::from_secs(15));
    let ours = send(addr, "POST", "/login", &[], b"").await.unwrap();
    let layers = send(addr, "POST", "/limited", &[], b"").await.unwrap();
    assert_eq!(ours.status, 429);
    for header in [
        "retry-after",
        "ratelimit-policy",
        "ratelimit",
        "content-type",
    ] {
        assert_eq!(ours.header(header), layers.header(header), "{header}");
    }
    assert_eq!(ours.header("retry-after"), "45");
    assert_eq!(ours.body, layers.body);
}

async fn search(addr: SocketAddr, key: &str) -> u16 {
    let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
    status_of(addr, "GET", "/search", &headers).await
}

async fn set_plan(addr: SocketAddr, key: &str, plan: &str) -> Response {
    let value = format!("Bearer {ADMIN_TOKEN}").into_bytes();
    let path = format!("/admin/plans/{key}");
    send(
        addr,
        "PUT",
        &path,
        &[("authorization", &value)],
        plan.as_bytes(),
    )
    .await
    .unwrap()
}

/// A key's plan set on one instance applies on the other at its next
/// request: the assignment is answered once every instance has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plan_set_on_one_instance_applies_on_the_other_at_once() {
    let redis = redis();
    let (a, b) = (redis_server(&redis).await, redis_server(&redis).await);
    let key = format!("key-{}", redis.prefix());
    assert_eq!(set_plan(a, &key, "pro").await.status, 200);
    // Pro: 100 a minute; free would have stopped at 10.
    for i in 0..11 {
        assert_eq!(search(b, &key).await, 200, "search {i}");
    }
    assert_eq!(set_plan(a, &key, "free").await.status, 200);
    // Back on free, with 11 used: denied on either instance.
    assert_eq!(search(b, &key).await, 429);
    assert_eq!(search(a, &key).await, 429);
    // A third instance reads the assignments when it subscribes.
    assert_eq!(set_plan(a, &key, "pro").await.status, 200);
    let c = redis_server(&redis).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while search(c, &key).await != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the third instance never read the plan"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
