//! Coalesced checks keep their deadlines: every caller is answered by the
//! response timeout from when it asked, whoever runs the call it waits for
//! (the first caller's own, or the batches' task), even when Redis hangs
//! or the first caller stops polling its future without dropping it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use limiter_core::{Error, Key, Policy, Rule, Store};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use limiter_tests::proxy::LatencyProxy;

const TIMEOUT: Duration = Duration::from_millis(500);
/// How late a timer may fire on a loaded 2-core machine. A caller left
/// without a timer would wait until the test gives up (seconds), not this.
const LATE: Duration = Duration::from_millis(300);

async fn store(server: &RedisServer) -> RedisStore {
    let config = RedisConfig::new().response_timeout(TIMEOUT);
    RedisStore::connect_with(&server.url(), config)
        .await
        .unwrap()
}

fn policy() -> Policy {
    Policy::fixed_window(Rule::new(1 << 40, Duration::from_secs(3600)).unwrap())
}

/// A check's outcome and how long its caller waited.
async fn timed_check(store: &RedisStore, key: &str) -> (Result<bool, Error>, Duration) {
    let start = Instant::now();
    let outcome = store.check(&Key::from(key), &policy(), 1).await;
    (outcome.map(|d| d.allowed()), start.elapsed())
}

/// Asserts a caller that was not answered timed out at its deadline, not
/// before and not long after.
fn assert_timed_out(outcome: &Result<bool, Error>, waited: Duration) {
    assert!(
        matches!(outcome, Err(Error::Timeout(TIMEOUT))),
        "expected a timeout, got {outcome:?} after {waited:?}"
    );
    assert!(waited >= TIMEOUT, "timed out early, after {waited:?}");
    assert!(waited < TIMEOUT + LATE, "answered late, after {waited:?}");
}

/// A hot key under load, batch after batch in the batches' task, when
/// Redis hangs: the callers in the batch in flight and those queued behind
/// it each time out by their own deadline. (Some fail sooner: a call that
/// joins a connection attempt under way fails when the attempt times out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_of_a_hot_key_time_out_at_their_deadlines_when_redis_hangs() {
    let server = RedisServer::start();
    let store = store(&server).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (store, stop) = (store.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    outcomes.push(timed_check(&store, "hot").await);
                }
                outcomes
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.signal("STOP");
    // Long enough for every caller waiting at the hang to time out, and
    // for the next ones to queue behind batches that hang too.
    tokio::time::sleep(TIMEOUT * 3).await;
    stop.store(true, Ordering::Relaxed);
    tokio::time::sleep(TIMEOUT + LATE).await;
    server.signal("CONT");
    let (mut allowed, mut at_deadline, mut sooner) = (0, 0, 0);
    for task in tasks {
        let outcomes = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("every caller answered")
            .unwrap();
        for (outcome, waited) in outcomes {
            assert!(waited < TIMEOUT + LATE, "answered after {waited:?}");
            match outcome {
                Ok(true) => allowed += 1,
                Err(Error::Timeout(TIMEOUT)) if waited >= TIMEOUT => at_deadline += 1,
                Err(Error::Timeout(TIMEOUT)) => sooner += 1,
                other => panic!("{other:?} after {waited:?}"),
            }
        }
    }
    assert!(allowed > 64, "the load ran before the hang: {allowed}");
    // Every task timed out at its deadline at least once, and again after
    // its first timeout (queued behind a batch that hung).
    assert!(
        at_deadline >= 2 * 64,
        "{at_deadline} timeouts ({sooner} sooner)"
    );
}

/// The first caller of a key polls its check once (its call is sent) and
/// then neither polls it again nor drops it. The callers queued behind
/// that call still time out at their deadlines; once it is dropped, the
/// key's checks go on. (Behind a proxy adding latency, so the first call
/// cannot be answered within its first poll.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_queued_behind_a_first_check_left_unpolled_time_out() {
    let server = RedisServer::start();
    let target = ([127, 0, 0, 1], server.port()).into();
    let proxy = LatencyProxy::start(target, Duration::from_millis(20)).await;
    let config = RedisConfig::new().response_timeout(TIMEOUT);
    let store = RedisStore::connect_with(&proxy.url(), config)
        .await
        .unwrap();
    assert!(timed_check(&store, "stalled").await.0.unwrap(), "allowed");
    let (policy, stalled) = (policy(), Key::from("stalled"));
    let mut first = Box::pin(store.check(&stalled, &policy, 1));
    std::future::poll_fn(|cx| {
        match first.as_mut().poll(cx) {
            Poll::Pending => {}
            Poll::Ready(answer) => panic!("answered at its first poll: {answer:?}"),
        }
        Poll::Ready(())
    })
    .await;
    let queued: Vec<_> = (0..20)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { timed_check(&store, "stalled").await })
        })
        .collect();
    for task in queued {
        let (outcome, waited) = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("a caller queued behind an unpolled check is answered")
            .unwrap();
        assert_timed_out(&outcome, waited);
    }
    drop(first);
    let (outcome, waited) = timed_check(&store, "stalled").await;
    assert!(outcome.unwrap(), "allowed");
    assert!(waited < TIMEOUT, "{waited:?}");
    // The two allowed and the first, whose call was sent; not the 20.
    let counted = server.command(&["HGET", "stalled", "c"]);
    assert_eq!(counted.trim(), "3");
}
