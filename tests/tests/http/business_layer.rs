//! The UGC server's limits that follow the business, over real HTTP, on
//! the memory store (time moved by hand) and on Redis: plans changed under
//! load, exports limited in flight across two instances, replies waiting
//! for their retry time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use limiter_examples::admin::AdminToken;
use limiter_examples::{Options, app};
use limiter_tests::http::{Response, send, serve};
use limiter_tests::{TestRedis, redis};
use limiter_tower::{
    ConcurrencyLimit, GuardConfig, KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock,
    MaxWait, MemoryStore, Policy, Rule, Waiters,
};
use tokio::task::JoinSet;
use tower::ServiceExt;

const T0: Duration = Duration::from_secs(1_750_000_000);
/// The token of the admin routes.
const ADMIN_TOKEN: &str = "business-layer-admin-token";

fn admin_token() -> Option<AdminToken> {
    Some(AdminToken::new(ADMIN_TOKEN).expect("a valid token"))
}

/// `Authorization: Bearer <ADMIN_TOKEN>`.
fn admin_header() -> (&'static str, Vec<u8>) {
    (
        "authorization",
        format!("Bearer {ADMIN_TOKEN}").into_bytes(),
    )
}

/// A UGC server on the memory store, its clock and waiters moved by hand.
async fn memory_server() -> (SocketAddr, ManualClock) {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    let options = Options {
        waiters: Some(Waiters::with_clock(clock.clone())),
        admin_token: admin_token(),
        ..Options::default()
    };
    (serve(app(limiter, options)).await, clock)
}

/// A UGC server on `redis`, its keys under the test's prefix, with a
/// deadline no loaded test machine misses (a missed one would let the
/// fallback decide, which counts on its own).
async fn redis_server(redis: &TestRedis) -> SocketAddr {
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let options = Options {
        guard: GuardConfig {
            deadline: Duration::from_secs(5),
            ..GuardConfig::default()
        },
        admin_token: admin_token(),
        ..Options::default()
    };
    serve(app(limiter, options)).await
}

async fn search(addr: SocketAddr, key: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
    send(addr, "GET", "/search", &headers, b"").await.unwrap()
}

async fn set_plan(addr: SocketAddr, key: &str, plan: &str) {
    let path = format!("/admin/plans/{key}");
    let (name, value) = admin_header();
    let response = send(addr, "PUT", &path, &[(name, &value)], plan.as_bytes())
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{response:#?}");
}

/// Sends `count` searches at once; answers how many passed.
async fn searches_at_once(addr: SocketAddr, key: &str, count: usize) -> usize {
    let mut tasks = JoinSet::new();
    for _ in 0..count {
        let key = key.to_owned();
        tasks.spawn(async move { search(addr, &key).await.status });
    }
    let statuses = tasks.join_all().await;
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    statuses.iter().filter(|s| **s == 200).count()
}

/// Free then pro then free again, with requests in flight while the plan is
/// lowered: never more than the plan in force allows in the window.
async fn plans_follow_the_key(addr: SocketAddr) {
    for remaining in (0..10).rev() {
        let ok = search(addr, "k1").await;
        assert_eq!(ok.status, 200);
        assert_eq!(
            ok.header("ratelimit"),
            format!("\"free:10-per-60s\";r={remaining};t=60")
        );
    }
    let denied = search(addr, "k1").await;
    denied.assert_denied("60", &[("free:10-per-60s", 10, 60, 0, 60)]);
    set_plan(addr, "k1", "pro").await;
    assert_eq!(searches_at_once(addr, "k1", 120).await, 90);
    search(addr, "k1")
        .await
        .assert_denied("60", &[("pro:100-per-60s", 100, 60, 0, 60)]);

    // A fresh key on pro, lowered to free while 150 requests are in flight.
    set_plan(addr, "k2", "pro").await;
    let load = tokio::spawn(searches_at_once(addr, "k2", 150));
    tokio::task::yield_now().await;
    set_plan(addr, "k2", "free").await;
    let passed = load.await.unwrap();
    assert!(passed <= 100, "{passed} passed a limit of 100");
    // From the change on, the window holds what passed: free admits only
    // what is left of its 10.
    let after = searches_at_once(addr, "k2", 30).await;
    assert_eq!(
        after,
        10usize.saturating_sub(passed),
        "{passed} passed before"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keys_plan_changes_at_run_time_on_memory() {
    let (addr, _clock) = memory_server().await;
    plans_follow_the_key(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keys_plan_changes_at_run_time_on_redis() {
    let redis = redis();
    plans_follow_the_key(redis_server(&redis).await).await;
}

#[tokio::test]
async fn an_unknown_plan_and_a_remote_admin_are_refused() {
    let (addr, _clock) = memory_server().await;
    let (name, value) = admin_header();
    let admin: [(&str, &[u8]); 1] = [(name, &value)];
    let response = send(addr, "PUT", "/admin/plans/k", &admin, b"gold")
        .await
        .unwrap();
    assert_eq!(response.status, 400);
    let long = format!("/admin/plans/{}", "k".repeat(300));
    let response = send(addr, "PUT", &long, &admin, b"pro").await.unwrap();
    assert_eq!(response.status, 400);
    // Without the admin token, from loopback all the same: refused.
    let response = send(addr, "PUT", "/admin/plans/k", &[], b"pro")
        .await
        .unwrap();
    assert_eq!(response.status, 401);
    assert_eq!(search(addr, "").await.status, 401);
}

async fn export(addr: SocketAddr, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    send(addr, "POST", "/exports", &headers, b"").await.unwrap()
}

/// Two exports in flight on `first`, a third on `second`: refused; once
/// they end, the next passes.
async fn two_exports_in_flight(first: SocketAddr, second: SocketAddr) {
    let a = tokio::spawn(export(first, "laoqian"));
    let b = tokio::spawn(export(first, "laoqian"));
    // Both take their permits long before their 500 ms are over.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = export(second, "laoqian").await;
    assert_eq!(refused.status, 429, "{refused:#?}");
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(
        refused.header("ratelimit-policy"),
        "\"2-concurrent\";q=2;qu=\"concurrent-requests\""
    );
    assert_eq!(refused.header("ratelimit"), "\"2-concurrent\";r=0;t=1");
    // Another user has permits of their own.
    assert_eq!(export(second, "xiaoming").await.status, 201);
    assert_eq!(a.await.unwrap().status, 201);
    assert_eq!(b.await.unwrap().status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_two_exports_in_flight_on_memory() {
    let (addr, _clock) = memory_server().await;
    two_exports_in_flight(addr, addr).await;
    assert_eq!(export(addr, "laoqian").await.status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_two_exports_in_flight_across_two_instances_sharing_redis() {
    let redis = redis();
    let (first, second) = (redis_server(&redis).await, redis_server(&redis).await);
    two_exports_in_flight(first, second).await;
    // Permits are given back in a task of their own: the next export may
    // find one still held for a moment, never for long.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while export(second, "laoqian").await.status != 201 {
        assert!(
            std::time::Instant::now() < deadline,
            "permits never given back"
        );
    }
}

async fn reply(addr: SocketAddr, path: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", b"laoqian")];
    send(addr, "POST", path, &headers, b"").await.unwrap()
}

#[tokio::test]
async fn a_reply_with_wait_waits_for_its_retry_time_within_two_seconds() {
    let (addr, clock) = memory_server().await;
    for _ in 0..5 {
        assert_eq!(reply(addr, "/posts/1/replies").await.status, 201);
        clock.advance(Duration::from_secs(1));
    }
    // The first reply leaves the window in 55 s: beyond 2 s, refused at once.
    let refused = reply(addr, "/posts/1/replies?wait=1").await;
    refused.assert_denied("55", &[("5-per-60s", 5, 60, 0, 55)]);
    clock.advance(Duration::from_secs(54));
    // 1 s away: without `wait=1` refused, with it, it waits.
    assert_eq!(reply(addr, "/posts/1/replies").await.status, 429);
    let first = tokio::spawn(reply(addr, "/posts/1/replies?wait=1"));
    let second = tokio::spawn(reply(addr, "/posts/1/replies?wait=1"));
    let finished = |a: &tokio::task::JoinHandle<Response>,
                    b: &tokio::task::JoinHandle<Response>| {
        usize::from(a.is_finished()) + usize::from(b.is_finished())
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Not a microsecond before the retry time.
    clock.advance(Duration::from_micros(999_999));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(finished(&first, &second), 0);
    clock.advance(Duration::from_micros(1));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while finished(&first, &second) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no waiter passed at its retry time"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The next reply leaves a second later, within the second one's bound.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(finished(&first, &second), 1);
    assert!(first.is_finished(), "the first waiter passes first");
    clock.advance(Duration::from_secs(1));
    let statuses = [first.await.unwrap().status, second.await.unwrap().status];
    assert_eq!(statuses, [201, 201]);
}

/// A limit of 1 a second that waits up to 3 s, on `redis`.
async fn waiting_app(redis: &TestRedis) -> (axum::Router, Waiters) {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(1)).unwrap()]).unwrap();
    let limit = LimitLayer::new("waits", policy, KeySource::global())
        .wait(MaxWait::new(Duration::from_secs(3)).unwrap());
    let waiters = Waiters::new();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let router = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }).layer(limit))
        .layer(LimiterLayer::new(limiter).waiters(waiters.clone()));
    (router, waiters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_pass_in_order_on_redis_and_a_cancelled_one_leaves() {
    let redis = redis();
    let (router, waiters) = waiting_app(&redis).await;
    let get = || {
        let request = axum::http::Request::get("/")
            .body(axum::body::Body::empty())
            .unwrap();
        router.clone().oneshot(request)
    };
    assert_eq!(get().await.unwrap().status(), 200);
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = JoinSet::new();
    for i in 0..2 {
        let (request, order) = (get(), Arc::clone(&order));
        tasks.spawn(async move {
            let status = request.await.unwrap().status();
            order.lock().unwrap().push(i);
            status
        });
        // The first joins the queue before the second.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while waiters.waiting() < i + 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "waiter {i} never queued"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    // A third waiter gives up: it leaves the queue, and no quota is used.
    let third = tokio::spawn(get());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while waiters.waiting() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the third waiter never queued"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    third.abort();
    let _ = third.await;
    assert_eq!(waiters.waiting(), 2);
    let statuses = tasks.join_all().await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(*order.lock().unwrap(), [0, 1]);
    assert_eq!(waiters.waiting(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_request_gives_its_permit_back_on_redis() {
    let redis = redis();
    let limit = LimitLayer::concurrent(
        "held",
        ConcurrencyLimit::new(1).unwrap(),
        KeySource::global(),
    );
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let router = axum::Router::new()
        .route(
            "/",
            axum::routing::get(std::future::pending::<&'static str>).layer(limit),
        )
        .layer(LimiterLayer::new(limiter));
    let get = || {
        let request = axum::http::Request::get("/")
            .body(axum::body::Body::empty())
            .unwrap();
        router.clone().oneshot(request)
    };
    let held = tokio::spawn(get());
    let key = format!("{}:held:concurrent", redis.prefix());
    let count = || async {
        let mut raw = redis.raw().await;
        redis::AsyncCommands::zcard::<_, u64>(&mut raw, &key)
            .await
            .unwrap()
    };
    while count().await != 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let refused = tokio::time::timeout(Duration::from_secs(5), get())
        .await
        .unwrap();
    assert_eq!(refused.unwrap().status(), 429);
    held.abort();
    let _ = held.await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while count().await != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the permit was never given back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cost_from_the_request_is_charged_on_redis() {
    let redis = redis();
    let bucket = Policy::token_bucket(limiter_tower::Rate::per_second(1).unwrap(), 10).unwrap();
    let name = bucket.names()[0].clone();
    let limit = LimitLayer::new("imports", bucket, KeySource::global()).cost(|parts| {
        let size = parts.headers.get("x-batch").and_then(|v| v.to_str().ok());
        size.and_then(|n| n.parse().ok()).unwrap_or(1)
    });
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let router = axum::Router::new()
        .route(
            "/",
            axum::routing::post(|| async { "imported" }).layer(limit),
        )
        .layer(LimiterLayer::new(limiter).guard(GuardConfig {
            deadline: Duration::from_secs(5),
            ..GuardConfig::default()
        }));
    let import = |batch: &str| {
        let request = axum::http::Request::post("/")
            .header("x-batch", batch)
            .body(axum::body::Body::empty())
            .unwrap();
        router.clone().oneshot(request)
    };
    let first = import("7").await.unwrap();
    assert_eq!(first.status(), 200);
    let fields = first.headers()["ratelimit"].to_str().unwrap();
    assert!(fields.contains(";r=3;"), "{fields}");
    // 11 tokens can never be had from a bucket of 10: refused for good.
    let impossible = import("11").await.unwrap();
    assert_eq!(impossible.status(), 429);
    assert!(impossible.headers().get("retry-after").is_none());
    // 5 is more than the 3 left, and than the 4 a second later: the
    // problem names the rule it violates, measured at its own cost.
    let over = import("5").await.unwrap();
    assert_eq!(over.status(), 429);
    let body = axum::body::to_bytes(over.into_body(), 4096).await.unwrap();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        problem["violated-policies"],
        serde_json::json!([name]),
        "{problem}"
    );
}
