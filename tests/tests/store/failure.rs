//! Redis failing under real processes: killed mid-load and restarted, hung
//! (SIGSTOP), refusing connections at start-up. Every call keeps its
//! deadline, the failure policy decides meanwhile, the breaker stops paying
//! the deadline, and decisions return to Redis once it is back.

use std::time::{Duration, Instant};

use limiter_core::{GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Store, Verdict};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::http::{send, status_of};
use limiter_tests::{RedisServer, UgcServer, until};
use redis::AsyncCommands;

const DEADLINE: Duration = Duration::from_millis(50);
/// Scheduling slack on a loaded 2-core machine, on top of the deadline.
const MARGIN: Duration = Duration::from_millis(100);
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

fn guarded(url: &str) -> Guarded<RedisStore> {
    let redis = RedisStore::open_with(url, RedisConfig::new().response_timeout(DEADLINE)).unwrap();
    Guarded::new(
        redis,
        GuardConfig {
            deadline: DEADLINE,
            ..GuardConfig::default()
        },
    )
}

fn roomy() -> Policy {
    Policy::sliding_log([Rule::new(1_000_000, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// Which stage decided, and how long the call took.
#[derive(Debug, Default)]
struct Tally {
    store: usize,
    fallback: usize,
    slow: usize,
    calls: usize,
    longest: Duration,
}

/// Checks sequentially for `period`, 1 ms apart, tallying the outcomes.
async fn run_for(store: &Guarded<RedisStore>, key: &str, period: Duration) -> Tally {
    let mut tally = Tally::default();
    let until = Instant::now() + period;
    while Instant::now() < until {
        let started = Instant::now();
        let verdict = store
            .check_with(&Key::from(key), &roomy(), 1, OnStoreError::default())
            .await
            .expect("the failure policy always decides");
        let took = started.elapsed();
        tally.calls += 1;
        tally.longest = tally.longest.max(took);
        if took >= DEADLINE - Duration::from_millis(5) {
            tally.slow += 1;
        }
        match verdict {
            Verdict::Store(_) => tally.store += 1,
            Verdict::Fallback(_) => tally.fallback += 1,
            other => panic!("unexpected verdict {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tally
}

/// Checks until Redis decides again; returns how long that took.
async fn until_redis_decides(store: &Guarded<RedisStore>, key: &str) -> Duration {
    until(
        Instant::now(),
        Duration::from_secs(10),
        Duration::from_millis(5),
        || "Redis never decided again".into(),
        async || {
            let (policy, key) = (roomy(), Key::from(key));
            let checked = store.check_with(&key, &policy, 1, OnStoreError::default());
            matches!(checked.await.unwrap(), Verdict::Store(_))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_load_then_restarted_empty() {
    let mut server = RedisServer::start();
    let store = guarded(&server.url());
    let before = run_for(&store, "load", Duration::from_millis(200)).await;
    assert_eq!((before.fallback, before.calls), (0, before.store));

    server.kill();
    let down = run_for(&store, "load", Duration::from_millis(1500)).await;
    println!("Redis killed: {down:?}");
    assert_eq!(down.store, 0);
    assert_eq!(down.fallback, down.calls);
    assert!(
        down.longest <= DEADLINE + MARGIN,
        "a call took {:?}",
        down.longest
    );

    // Back, empty: no scripts, no keys. Decisions return within a probe interval.
    server.restart();
    let back_after = until_redis_decides(&store, "load").await;
    println!("Redis back: decided by Redis again after {back_after:?}");
    assert!(back_after <= PROBE_INTERVAL + MARGIN);

    // Shared counting resumes: two instances share one limit of 10.
    let other_instance = guarded(&server.url());
    let ten = Policy::sliding_log([Rule::new(10, Duration::from_secs(60)).unwrap()]).unwrap();
    let mut allowed = 0;
    for i in 0..30 {
        let instance = if i % 2 == 0 { &store } else { &other_instance };
        let verdict = instance
            .check_with(&Key::from("shared"), &ten, 1, OnStoreError::default())
            .await
            .unwrap();
        assert!(
            matches!(verdict, Verdict::Store(_) | Verdict::Cached(_)),
            "{verdict:?}"
        );
        allowed += usize::from(verdict.allowed());
    }
    assert_eq!(allowed, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_costs_the_deadline_only_until_the_breaker_opens() {
    let server = RedisServer::start();
    let store = guarded(&server.url());
    run_for(&store, "hung", Duration::from_millis(100)).await;

    server.signal("STOP");
    let period = Duration::from_millis(2500);
    let hung = run_for(&store, "hung", period).await;
    server.signal("CONT");
    println!(
        "Redis hung for {period:?}: {} of {} calls paid the deadline, the longest took {:?}",
        hung.slow, hung.calls, hung.longest
    );
    assert_eq!(hung.store, 0);
    assert!(
        hung.longest <= DEADLINE + MARGIN,
        "a call took {:?}",
        hung.longest
    );
    // Three failures open the breaker, then one probe per interval pays it.
    let probes = (period.as_millis() / PROBE_INTERVAL.as_millis()) as usize;
    assert!(
        hung.slow >= 3,
        "the breaker opened after {} slow calls",
        hung.slow
    );
    assert!(
        hung.slow <= 3 + probes,
        "{} slow calls: the breaker did not hold",
        hung.slow
    );
    assert!(hung.calls > 10 * hung.slow);

    let back_after = until_redis_decides(&store, "hung").await;
    assert!(
        back_after <= PROBE_INTERVAL + MARGIN,
        "back after {back_after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_a_denied_client_costs_one_redis_call() {
    let server = RedisServer::start();
    let store = guarded(&server.url());
    let once = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    // Load the script first, so only the flood's own calls are counted.
    store.check(&Key::from("warm-up"), &once, 1).await.unwrap();
    // The first check also subscribes to the store's notices, in a task
    // that reads the blocks (a script: an EVALSHA) and then the plans
    // (HGETALL): wait for it, or under load its call lands in the count.
    let subscribed = || {
        server
            .command(&["INFO", "commandstats"])
            .contains("cmdstat_hgetall:")
    };
    for _ in 0..500 {
        if subscribed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(subscribed(), "the store subscribed to its notices");
    server.command(&["CONFIG", "RESETSTAT"]);
    let flooder = Key::from("flooder");
    assert!(store.check(&flooder, &once, 1).await.unwrap().allowed());
    for _ in 0..1_000 {
        let denied = store.check(&flooder, &once, 1).await.unwrap();
        assert!(!denied.allowed());
    }
    let stats = server.command(&["INFO", "commandstats"]);
    let calls = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|l| l.split(',').next())
        .expect("EVALSHA was called");
    // One allowed, one denied: the other 999 denials came from the deny cache.
    println!("1,001 requests from one client cost {calls} Redis calls");
    assert_eq!(calls, "2");
}

#[tokio::test]
async fn the_server_starts_while_redis_refuses_connections_and_uses_it_once_up() {
    let port = RedisServer::unused_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let app = UgcServer::start(&[("REDIS_URL", &url)]);
    let user: &[(&str, &[u8])] = &[("x-user-id", b"early")];
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(status_of(app.addr(), "POST", "/posts/1/replies", user).await);
    }
    // Decided by the local fallback with the same rules.
    assert_eq!(statuses, [201, 201, 201, 201, 201, 429]);

    let server = RedisServer::start_on(port);
    tokio::time::sleep(PROBE_INTERVAL + MARGIN).await;
    let late: &[(&str, &[u8])] = &[("x-user-id", b"late")];
    assert_eq!(
        status_of(app.addr(), "POST", "/posts/1/replies", late).await,
        201
    );
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let counted: u64 = raw
        .zcard("rate_limit:user=late:posts-create_reply")
        .await
        .unwrap();
    // One entry, and the member that marks the newest entry.
    assert_eq!(counted, 2, "the late user's request was counted in Redis");
}

#[tokio::test]
async fn fail_open_and_fail_closed_over_http() {
    use axum::Router;
    use limiter_tower::{Limiter, LimiterLayer};

    let dead = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    let limiter = Limiter::new(RedisStore::open(&dead).unwrap());
    let one = || Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    let router = Router::new()
        .route(
            "/open",
            limited("open", one(), Some(OnStoreError::FailOpen)),
        )
        .route(
            "/closed",
            limited("closed", one(), Some(OnStoreError::FailClosed)),
        )
        .layer(LimiterLayer::new(limiter));
    let addr = limiter_tests::http::serve(router).await;
    for _ in 0..3 {
        let open = send(addr, "GET", "/open", &[], b"").await.unwrap();
        assert_eq!(open.status, 200);
        assert!(
            !open.headers.contains_key("ratelimit"),
            "no decision, no quota to report"
        );
        let closed = send(addr, "GET", "/closed", &[], b"").await.unwrap();
        assert_eq!(closed.status, 503);
        assert_eq!(closed.header("retry-after"), "1");
    }
}

/// The failure policy a request is decided by when the store fails: the
/// route's, else the router layer's, else the one its policy names, else
/// the guard's default (the local fallback).
#[tokio::test]
async fn the_route_and_the_layer_name_the_failure_policy_over_the_policys_own() {
    use axum::Router;
    use limiter_tower::{Limiter, LimiterLayer};

    let dead = || format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    // One a minute, failing open unless told otherwise.
    let open = || {
        Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()])
            .unwrap()
            .with_on_store_error(OnStoreError::FailOpen)
    };
    let closed_layer = LimiterLayer::new(Limiter::new(RedisStore::open(&dead()).unwrap()))
        .on_store_error(OnStoreError::FailClosed);
    let told = Router::new()
        .route(
            "/route",
            limited("route", open(), Some(OnStoreError::FailClosed)),
        )
        .route("/layer", limited("layer", open(), None))
        .layer(closed_layer);
    let untold = Router::new()
        .route("/policy", limited("policy", open(), None))
        .layer(LimiterLayer::new(Limiter::new(
            RedisStore::open(&dead()).unwrap(),
        )));
    let (told, untold) = (
        limiter_tests::http::serve(told).await,
        limiter_tests::http::serve(untold).await,
    );
    for _ in 0..3 {
        for path in ["/route", "/layer"] {
            let refused = send(told, "GET", path, &[], b"").await.unwrap();
            assert_eq!(refused.status, 503, "{path}");
        }
        // Not the fallback's one a minute: let through, unchecked.
        let let_through = send(untold, "GET", "/policy", &[], b"").await.unwrap();
        assert_eq!(let_through.status, 200);
        assert!(!let_through.headers.contains_key("ratelimit"));
    }
}

/// A `GET` route answering 200, limited globally by `policy` under `name`,
/// with its own failure policy when `on_error` names one.
fn limited(
    name: &'static str,
    policy: Policy,
    on_error: Option<OnStoreError>,
) -> axum::routing::MethodRouter {
    let limit = limiter_tower::LimitLayer::new(name, policy, limiter_tower::KeySource::global());
    let limit = match on_error {
        Some(on_error) => limit.on_store_error(on_error),
        None => limit,
    };
    axum::routing::get(|| async { "ok" }).layer(limit)
}
