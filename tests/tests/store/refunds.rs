//! Refunds through the layers and the programmatic API: a request dropped
//! at every await of the refund and the penalty paths leaves the store
//! exact; `count_when` reads the response, and every algorithm that gives
//! requests back does so (the others are refused); racing attempts count
//! while in flight; a refund forgets the key's cached denial.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{Request, StatusCode};
use axum::routing::post;
use limiter_conformance::poll_then_drop;
use limiter_tests::redis;
use limiter_tower::{
    Control, KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Penalty,
    Policy, Rule,
};
use tokio::task::JoinSet;
use tower::ServiceExt;

const T0: Duration = Duration::from_secs(1_750_000_000);

/// The local address `127.0.0.{n}`.
fn client(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// The `n`th client address of the test numbered `test`: each request
/// its own client.
fn client_number(test: u8, n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        10,
        test,
        (n / 250) as u8,
        (n % 250) as u8 + 1,
    ))
}

/// A limit named `name` of `n` failed requests a minute per client
/// address.
fn failures_a_minute(name: &'static str, n: u64) -> LimitLayer {
    let policy = Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]).unwrap();
    LimitLayer::new(name, policy, KeySource::ip())
        .count_failures()
        .unwrap()
}

/// A route counting failures only, by client address, whose handler says
/// how many responses it made.
fn counted_route(
    limiter: Limiter<impl limiter_tower::Store + Clone>,
    made: Arc<AtomicUsize>,
) -> (Router, Control) {
    let ok = failures_a_minute("ok", 100);
    let layer = LimiterLayer::new(limiter);
    let control = layer.control().limit("POST /ok", &ok);
    let handler = |State(made): State<Arc<AtomicUsize>>| async move {
        made.fetch_add(1, Ordering::SeqCst);
        StatusCode::OK
    };
    let router = Router::new()
        .route("/ok", post(handler).layer(ok))
        .with_state(made)
        .layer(layer);
    (router, control)
}

fn request_from(ip: IpAddr) -> Request<axum::body::Body> {
    let mut request = Request::post("/ok")
        .body(axum::body::Body::empty())
        .unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::new(ip, 40_000)));
    request
}

/// A successful request dropped after every number of polls, on Redis: once
/// its handler has made the response, the request is given back, even when
/// the response future is dropped while the refund is under way; before
/// that it counted, at most once.
// One thread: nothing progresses while the test polls.
#[tokio::test]
async fn a_request_dropped_at_every_await_of_the_refund_is_given_back_once_answered() {
    let redis = redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let made = Arc::new(AtomicUsize::new(0));
    let (router, control) = counted_route(limiter, Arc::clone(&made));
    let mut finished_at = None;
    for polls in 0..300u32 {
        let ip = client_number(1, polls);
        let before = made.load(Ordering::SeqCst);
        let answered =
            poll_then_drop(router.clone().oneshot(request_from(ip)), u64::from(polls)).await;
        let responded = made.load(Ordering::SeqCst) > before;
        if let Some(response) = answered {
            assert_eq!(response.unwrap().status(), 200);
            // Answered: the refund was made before the response.
            assert_eq!(left(&control, ip).await, 100, "after {polls} polls");
            finished_at = Some(polls);
            break;
        }
        // Dropped: a refund started runs to its end (on a loaded machine,
        // soon rather than at once).
        if responded {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while left(&control, ip).await != 100 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let left = left(&control, ip).await;
            assert_eq!(left, 100, "after {polls} polls: the response was made");
        } else {
            let left = left(&control, ip).await;
            assert!(left >= 99, "after {polls} polls: {left} left");
        }
    }
    assert!(
        finished_at.is_some_and(|polls| polls >= 2),
        "the request finished after being dropped: {finished_at:?}"
    );
}

async fn left(control: &Control, ip: IpAddr) -> u64 {
    let states = control
        .limits(&limiter_tower::Identity::ip(ip))
        .await
        .unwrap();
    states[0].remaining
}

/// A denied request dropped after every number of polls, on Redis, where a
/// denial earns a block: a penalty counted is a block applied, so the block
/// in force is always the first step's, never the next offence's.
#[tokio::test]
async fn a_denial_dropped_at_every_await_of_the_penalty_blocks_at_the_first_step() {
    let redis = redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let minute = Duration::from_secs(60);
    let limit = LimitLayer::new(
        "guarded",
        Policy::sliding_log([Rule::new(1, minute).unwrap()]).unwrap(),
        KeySource::ip(),
    )
    .penalty(Penalty::new(1, 10 * minute, [minute, 60 * minute]).unwrap());
    let layer = LimiterLayer::new(limiter);
    let control = layer.control();
    let router = Router::new()
        .route("/ok", post(|| async { StatusCode::OK }).layer(limit))
        .layer(layer);
    let mut finished_at = None;
    for polls in 0..300u32 {
        let ip = client_number(2, polls);
        let first = router.clone().oneshot(request_from(ip)).await.unwrap();
        assert_eq!(first.status(), 200);
        let dropped =
            poll_then_drop(router.clone().oneshot(request_from(ip)), u64::from(polls)).await;
        // A penalty started runs to its end: soon, on a loaded machine.
        tokio::time::sleep(Duration::from_millis(300)).await;
        if dropped.is_none() {
            // Denied again, in full: blocked at the first step whether or
            // not the dropped denial was counted.
            let denied = router.clone().oneshot(request_from(ip)).await.unwrap();
            assert_eq!(denied.status(), 429, "after {polls} polls");
        }
        let blocked = control.blocked(&limiter_tower::Identity::ip(ip));
        assert!(
            blocked.is_some_and(|left| left <= minute),
            "after {polls} polls: blocked {blocked:?}"
        );
        if let Some(response) = dropped {
            assert_eq!(response.unwrap().status(), 429);
            finished_at = Some(polls);
            break;
        }
    }
    assert!(
        finished_at.is_some_and(|polls| polls >= 2),
        "the denial finished after being dropped: {finished_at:?}"
    );
}

/// The programmatic API on Redis: attempts racing count while in flight, so
/// exactly the limit is allowed; the ones given back free their quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_attempts_through_the_limiter_allow_exactly_the_limit_on_redis() {
    let redis = redis();
    let limiter = Arc::new(Limiter::new(redis.store().await).with_prefix(redis.prefix()));
    let failures = Policy::sliding_log([Rule::new(5, Duration::from_secs(900)).unwrap()]).unwrap();
    let mut set = JoinSet::new();
    for _ in 0..50 {
        let (limiter, failures) = (Arc::clone(&limiter), failures.clone());
        set.spawn(async move {
            let attempt = limiter.attempt("login:ivan", &failures).await.unwrap();
            attempt.decision().allowed()
        });
    }
    let mut allowed = 0;
    while let Some(answer) = set.join_next().await {
        allowed += usize::from(answer.unwrap());
    }
    assert_eq!(allowed, 5);
    // Used up; an attempt given back after another is denied frees one.
    let denied = limiter.attempt("login:ivan", &failures).await.unwrap();
    assert!(!denied.decision().allowed());
    assert_eq!(denied.receipt(), None);
    denied.refund().await.unwrap(); // nothing was recorded: nothing given
    assert!(
        !limiter
            .check("login:ivan", &failures)
            .await
            .unwrap()
            .allowed()
    );
    let fresh = limiter.attempt("login:judy", &failures).await.unwrap();
    assert!(fresh.receipt().is_some());
    fresh.refund().await.unwrap();
    assert_eq!(
        limiter
            .peek("login:judy", &failures)
            .await
            .unwrap()
            .remaining(),
        4
    );
    // A bucket cannot give a request back: refused, nothing recorded.
    let bucket = Policy::token_bucket(limiter_tower::Rate::per_second(1).unwrap(), 5).unwrap();
    let refused = limiter
        .attempt("login:judy:bucket", &bucket)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            limiter_tower::Error::Config(limiter_tower::ConfigError::NotRefundable {
                algorithm: "token_bucket"
            })
        ),
        "{refused:?}"
    );
}

/// `count_when` sees the response's headers, and the window counters give
/// requests back too; a bucket or GCRA is refused when the limit is made.
#[tokio::test]
async fn count_when_reads_the_response_and_every_refunding_algorithm_gives_back() {
    let minute = Duration::from_secs(60);
    let rule = Rule::new(2, minute).unwrap();
    let policies = [
        Policy::sliding_log([rule]).unwrap(),
        Policy::fixed_window(rule),
        Policy::sliding_window(rule),
    ];
    for policy in policies {
        let algorithm = policy.algorithm();
        // Counted unless the handler answers `x-counted: no`.
        let limit = LimitLayer::new("uploads", policy, KeySource::ip())
            .count_when(|_, headers| headers.get("x-counted").is_none_or(|v| v != "no"))
            .unwrap();
        let handler = |request: Request<axum::body::Body>| async move {
            let free = request.uri().query() == Some("free");
            let mut response = axum::response::Response::new(axum::body::Body::empty());
            if free {
                response
                    .headers_mut()
                    .insert("x-counted", "no".parse().unwrap());
            }
            response
        };
        let clock = ManualClock::new(T0);
        let layer = LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock)));
        let router = Router::new()
            .route("/upload", post(handler).layer(limit))
            .layer(layer);
        let send = |free: bool| {
            let uri = if free { "/upload?free" } else { "/upload" };
            let mut request = Request::post(uri).body(axum::body::Body::empty()).unwrap();
            request
                .extensions_mut()
                .insert(ConnectInfo(SocketAddr::new(client(40), 40_000)));
            router.clone().oneshot(request)
        };
        for i in 0..10 {
            let response = send(true).await.unwrap();
            assert_eq!(response.status(), 200, "{algorithm}: free upload {i}");
        }
        for i in 0..2 {
            assert_eq!(
                send(false).await.unwrap().status(),
                200,
                "{algorithm}: upload {i}"
            );
        }
        assert_eq!(
            send(true).await.unwrap().status(),
            429,
            "{algorithm}: over the limit"
        );
    }
    for refused in [
        Policy::gcra(limiter_tower::Rate::per_second(1).unwrap(), 5).unwrap(),
        Policy::leaky_bucket(limiter_tower::Rate::per_second(1).unwrap(), 5).unwrap(),
    ] {
        let algorithm = refused.algorithm().name();
        let made = LimitLayer::new("uploads", refused, KeySource::ip()).count_failures();
        assert_eq!(
            made.unwrap_err(),
            limiter_tower::ConfigError::NotRefundable { algorithm }
        );
    }
}

/// A request given back forgets the denial the guard's deny cache holds
/// for its key: the next request is decided by Redis, on the state after
/// the refund, instead of answered 429 from the cache until its retry time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_forgets_the_cached_denial_of_its_key_on_redis() {
    let redis = redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let limit = failures_a_minute("once", 1);
    // The slow request says when its handler runs, then waits for `release`.
    let (started, release) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let handler =
        |State((started, release)): State<(Arc<tokio::sync::Notify>, Arc<tokio::sync::Notify>)>,
         request: Request<axum::body::Body>| async move {
            if request.uri().query() == Some("slow") {
                started.notify_one();
                release.notified().await;
            }
            StatusCode::OK
        };
    let router = Router::new()
        .route("/once", post(handler).layer(limit))
        .with_state((Arc::clone(&started), Arc::clone(&release)))
        .layer(LimiterLayer::new(limiter));
    let send = |uri: &str| {
        let mut request = Request::post(uri).body(axum::body::Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(client(41), 40_000)));
        router.clone().oneshot(request)
    };
    // In flight: it counts, so the next is denied (and cached).
    let slow = tokio::spawn(send("/once?slow"));
    started.notified().await;
    let denied = send("/once").await.unwrap();
    assert_eq!(denied.status(), 429);
    release.notify_one();
    assert_eq!(slow.await.unwrap().unwrap().status(), 200);
    // Given back: the key is free again, on this instance at once.
    assert_eq!(send("/once").await.unwrap().status(), 200);
}
