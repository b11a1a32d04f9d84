//! Futures dropped mid-way (a client that disconnects, a timeout layer
//! above the limiter): whatever state a check set is undone, so nothing
//! stays stuck and no limit is passed.

use std::time::{Duration, Instant};

use limiter_conformance::poll_then_drop;
use limiter_core::{
    BreakerState, GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Store, Verdict,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisServer, http::send};
use redis::AsyncCommands;

const DEADLINE: Duration = Duration::from_millis(50);
const PROBE_INTERVAL: Duration = Duration::from_millis(200);
/// Scheduling slack on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_millis(300);

fn guarded(url: &str) -> Guarded<RedisStore> {
    let redis = RedisStore::open_with(url, RedisConfig::new().response_timeout(DEADLINE)).unwrap();
    let mut config = GuardConfig {
        deadline: DEADLINE,
        ..GuardConfig::default()
    };
    config.breaker.probe_interval = PROBE_INTERVAL;
    Guarded::new(redis, config)
}

fn limit(n: u64) -> Policy {
    Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_cancelled_on_a_hung_redis_does_not_keep_the_breaker_open() {
    let server = RedisServer::start();
    let store = guarded(&server.url());
    let (policy, key) = (limit(1_000_000), Key::from("k"));
    let on_error = OnStoreError::default();
    store.check_with(&key, &policy, 1, on_error).await.unwrap();

    server.signal("STOP");
    for _ in 0..3 {
        let verdict = store.check_with(&key, &policy, 1, on_error).await.unwrap();
        assert!(matches!(verdict, Verdict::Fallback(_)));
    }
    assert_eq!(store.breaker_state(), BreakerState::Open);
    tokio::time::sleep(PROBE_INTERVAL).await;
    // The probe waits on the hung Redis; its request goes away meanwhile.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(5),
        store.check_with(&key, &policy, 1, on_error),
    )
    .await;
    assert!(cancelled.is_err(), "the probe was still waiting");
    assert_eq!(store.breaker_state(), BreakerState::Open);

    server.signal("CONT");
    let started = Instant::now();
    loop {
        let verdict = store.check_with(&key, &policy, 1, on_error).await.unwrap();
        if matches!(verdict, Verdict::Store(_)) {
            break;
        }
        assert!(
            started.elapsed() <= PROBE_INTERVAL + MARGIN,
            "Redis is back but the breaker still skips it"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(store.breaker_state(), BreakerState::Closed);
}

/// A check dropped after every number of polls: before connecting, while
/// connecting, while the script is loaded (the server answered NOSCRIPT),
/// while the call is in flight. The store stays usable, and the key never
/// holds more than the limit, whether the dropped calls ran or not.
// One thread: nothing progresses while the test polls, so each number of
// polls stops the check at a later point (how many it takes varies with
// the I/O).
#[tokio::test]
async fn a_redis_check_dropped_at_every_await_point_leaves_the_store_sound() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut raw = client.get_multiplexed_async_connection().await.unwrap();
    let policy = limit(5);
    let mut finished_at = None;
    for polls in 0..200 {
        // A fresh store (not yet connected) and a server without scripts.
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        let store = RedisStore::open(&server.url()).unwrap();
        let key = Key::from(format!("k{polls}"));
        let dropped = poll_then_drop(store.check(&key, &policy, 1), polls).await;
        if let Some(decision) = dropped {
            assert!(decision.unwrap().allowed());
            finished_at = Some(polls);
            break;
        }
        // The same store still decides, exactly.
        let mut allowed = 0;
        for _ in 0..8 {
            allowed += usize::from(store.check(&key, &policy, 1).await.unwrap().allowed());
        }
        let entries: usize = raw.zcard(key.as_str()).await.unwrap();
        // The dropped call either ran (one entry) or did not; with the
        // newest-entry marker the log holds the allowed entries plus one.
        let dropped_ran = entries - 1 - allowed;
        assert!(dropped_ran <= 1, "after {polls} polls: {entries} entries");
        assert_eq!(allowed + dropped_ran, 5, "after {polls} polls");
    }
    println!("the check finished after {finished_at:?} polls");
    assert!(
        finished_at.is_some_and(|polls| polls >= 1),
        "the check finished, after being dropped at least once: {finished_at:?}"
    );
}

/// A store the application guarded itself is not guarded again by the
/// layer: its failure policy (fail closed) decides, not the layer's default
/// fallback.
#[tokio::test]
async fn a_guarded_store_keeps_its_own_failure_policy_behind_the_layer() {
    use axum::Router;
    use axum::routing::get;
    use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer};

    let dead = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    let closed = GuardConfig {
        on_store_error: OnStoreError::FailClosed,
        ..GuardConfig::default()
    };
    let store = Guarded::new(RedisStore::open(&dead).unwrap(), closed);
    let route = LimitLayer::new("route", limit(1), KeySource::global());
    let router = Router::new()
        .route("/", get(|| async { "ok" }).layer(route))
        .route(
            "/open",
            get(|| async { "ok" }).layer(
                LimitLayer::new("open", limit(1), KeySource::global())
                    .on_store_error(OnStoreError::FailOpen),
            ),
        )
        .layer(LimiterLayer::new(Limiter::new(store.clone())));
    let addr = limiter_tests::http::serve(router).await;
    for _ in 0..4 {
        let response = send(addr, "GET", "/", &[], b"").await.unwrap();
        assert_eq!(response.status, 503, "the store's own policy decides");
        // A route's own policy still applies.
        let open = send(addr, "GET", "/open", &[], b"").await.unwrap();
        assert_eq!(open.status, 200);
    }
    // One breaker counted the failures: the store's own.
    assert_eq!(store.breaker_state(), BreakerState::Open);
}
