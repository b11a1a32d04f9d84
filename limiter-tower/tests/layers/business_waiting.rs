//! Waiting for the retry time and concurrency permits, in process on the
//! memory store with a manual clock: exact retry times, cancelled waiters
//! and requests giving back what they held.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use limiter_tower::{
    ConcurrencyLimit, KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MaxWait,
    MemoryStore, Policy, Rule, Waiters,
};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::common;
use common::{app, request};

/// Polls `future` once.
async fn poll_once<F: Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx)))
        .await
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response.headers()[name].to_str().unwrap()
}

#[tokio::test]
async fn a_waiting_request_passes_exactly_at_its_retry_time() {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(2)).unwrap()]).unwrap();
    let limit = LimitLayer::new("r", policy, KeySource::ip())
        .wait(MaxWait::new(Duration::from_secs(3)).unwrap())
        .wait_when(|parts| parts.uri.query() != Some("wait=0"));
    let app = Arc::new(app(limit, |l| l));
    assert_eq!(app.send("203.0.113.7", &[]).await.status(), StatusCode::OK);
    let waiting = tokio::spawn({
        let app = Arc::clone(&app);
        async move { app.send("203.0.113.7", &[]).await.status() }
    });
    tokio::task::yield_now().await;
    // Not a microsecond early.
    app.clock.advance(Duration::from_micros(1_999_999));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished());
    assert_eq!(app.runs.load(Ordering::SeqCst), 1);
    app.clock.advance(Duration::from_micros(1));
    assert_eq!(waiting.await.unwrap(), StatusCode::OK);
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);
    // Beyond the bound, or not asking to wait: 429 at once.
    let mut refused = request("203.0.113.7", &[]);
    *refused.uri_mut() = "/r?wait=0".parse().unwrap();
    let refused = app.router.clone().oneshot(refused).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_cancelled_waiter_leaves_its_queue() {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(2)).unwrap()]).unwrap();
    let limit = LimitLayer::new("r", policy, KeySource::ip())
        .wait(MaxWait::new(Duration::from_secs(3)).unwrap());
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let shared = Waiters::with_clock(clock.clone());
    let router = Router::new()
        .route("/r", get(|| async { "ok" }).layer(limit))
        .layer(
            LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock.clone())))
                .waiters(shared.clone()),
        );
    let send = || router.clone().oneshot(request("203.0.113.7", &[]));
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);
    let mut first = Box::pin(send());
    assert!(poll_once(&mut first).await.is_pending());
    assert_eq!(shared.waiting(), 1);
    drop(first);
    assert_eq!(shared.waiting(), 0);
    clock.advance(Duration::from_secs(2));
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn a_permit_is_held_until_the_body_ends_or_is_dropped() {
    let gate = Arc::new(Semaphore::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let limit = LimitLayer::concurrent(
        "exports",
        ConcurrencyLimit::new(2).unwrap(),
        KeySource::ip(),
    );
    let handler = {
        let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
        get(move || {
            let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
            async move {
                entered.fetch_add(1, Ordering::SeqCst);
                gate.acquire().await.unwrap().forget();
                "exported"
            }
        })
    };
    let router = Router::new()
        .route("/r", handler.layer(limit))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let send = || router.clone().oneshot(request("203.0.113.7", &[]));
    let first = tokio::spawn(send());
    let second = tokio::spawn(send());
    while entered.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    let denied = send().await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&denied, "retry-after"), "1");
    assert_eq!(
        header(&denied, "ratelimit-policy"),
        "\"2-concurrent\";q=2;qu=\"concurrent-requests\""
    );
    assert_eq!(header(&denied, "ratelimit"), "\"2-concurrent\";r=0;t=1");
    gate.add_permits(2);
    let first = first.await.unwrap().unwrap();
    let second = second.await.unwrap().unwrap();
    assert_eq!(
        header(&first, "ratelimit-policy"),
        "\"2-concurrent\";q=2;qu=\"concurrent-requests\""
    );
    // Both bodies unread: both permits held.
    assert_eq!(
        send().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // One body read to its end, one dropped: both given back.
    let body = axum::body::to_bytes(first.into_body(), 64).await.unwrap();
    assert_eq!(&body[..], b"exported");
    drop(second);
    gate.add_permits(2);
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn a_cancelled_request_gives_its_permit_back() {
    let limit = LimitLayer::concurrent(
        "exports",
        ConcurrencyLimit::new(1).unwrap(),
        KeySource::ip(),
    );
    let router = Router::new()
        .route("/r", get(std::future::pending::<&'static str>).layer(limit))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let send = || router.clone().oneshot(request("203.0.113.7", &[]));
    let mut held = Box::pin(send());
    assert!(poll_once(&mut held).await.is_pending());
    let mut refused = Box::pin(send());
    let std::task::Poll::Ready(refused) = poll_once(&mut refused).await else {
        panic!("a refusal does not wait");
    };
    assert_eq!(refused.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    drop(held);
    let mut next = Box::pin(send());
    assert!(
        poll_once(&mut next).await.is_pending(),
        "the permit was given back"
    );
}

#[tokio::test]
async fn a_request_waits_for_a_permit_and_takes_it_once_one_is_given_back() {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let limit = LimitLayer::concurrent(
        "exports",
        ConcurrencyLimit::new(1).unwrap(),
        KeySource::ip(),
    )
    .wait(MaxWait::new(Duration::from_secs(3)).unwrap());
    let gate = Arc::new(Semaphore::new(0));
    let handler = {
        let gate = Arc::clone(&gate);
        get(move || {
            let gate = Arc::clone(&gate);
            async move {
                gate.acquire().await.unwrap().forget();
                "exported"
            }
        })
    };
    let router = Router::new().route("/r", handler.layer(limit)).layer(
        LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock.clone())))
            .waiters(Waiters::with_clock(clock.clone())),
    );
    let send = || router.clone().oneshot(request("203.0.113.7", &[]));
    let first = tokio::spawn(send());
    let mut second = Box::pin(send());
    tokio::task::yield_now().await;
    // The second waits (the permit's retry time is 1 s away)...
    assert!(poll_once(&mut second).await.is_pending());
    // ...until the first ends and its retry time comes.
    gate.add_permits(2);
    let first = first.await.unwrap().unwrap();
    drop(first);
    assert!(poll_once(&mut second).await.is_pending());
    clock.advance(ConcurrencyLimit::RETRY_AFTER);
    let second = second.await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(header(&second, "ratelimit"), "\"1-concurrent\";r=0;t=1");
}

#[tokio::test]
async fn the_router_layer_makes_every_limit_below_wait() {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(1)).unwrap()]).unwrap();
    let app = app(LimitLayer::new("r", policy, KeySource::ip()), |l| {
        l.wait(MaxWait::new(Duration::from_secs(2)).unwrap())
    });
    assert_eq!(app.send("203.0.113.7", &[]).await.status(), StatusCode::OK);
    let mut waiting = Box::pin(app.send("203.0.113.7", &[]));
    assert!(poll_once(&mut waiting).await.is_pending());
    app.clock.advance(Duration::from_secs(1));
    assert_eq!(waiting.await.status(), StatusCode::OK);
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);
}
