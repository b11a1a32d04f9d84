//! Redis failing while checks of a hot key are coalesced: every waiting
//! check gets the failure policy's decision exactly once, and a batch that
//! may have run is not sent again. It counts what the store recorded with
//! a recorder of its own, on its own thread: the binary's other tests send
//! Redis calls too.

use std::sync::Arc;
use std::time::Duration;

use limiter_core::{GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Verdict};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use metrics_util::debugging::{DebugValue, Snapshotter};

const CHECKS: usize = 200;

/// What was recorded since the last call (a snapshot drains the recorder).
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    calls: u64,
    fallbacks: u64,
    pub(crate) batch_sizes: Vec<f64>,
}

pub(crate) fn take_recorded(snapshotter: &Snapshotter) -> Recorded {
    let mut recorded = Recorded::default();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        match (key.key().name(), value) {
            ("limiter_redis_calls_total", DebugValue::Counter(n)) => recorded.calls += n,
            ("limiter_fallback_decisions_total", DebugValue::Counter(n)) => {
                recorded.fallbacks += n;
            }
            ("limiter_redis_batch_size", DebugValue::Histogram(values)) => recorded
                .batch_sizes
                .extend(values.into_iter().map(|v| v.into_inner())),
            _ => {}
        }
    }
    recorded
}

fn roomy() -> Policy {
    Policy::sliding_log([Rule::new(1_000_000, Duration::from_secs(60)).unwrap()]).unwrap()
}

fn guarded(url: &str, deadline: Duration) -> Arc<Guarded<RedisStore>> {
    let redis = RedisStore::open_with(url, RedisConfig::new().response_timeout(deadline)).unwrap();
    Arc::new(Guarded::new(
        redis,
        GuardConfig {
            deadline,
            ..GuardConfig::default()
        },
    ))
}

/// `CHECKS` concurrent checks of one key; the verdicts, once all answered.
async fn hot_checks(
    store: &Arc<Guarded<RedisStore>>,
    key: &str,
) -> Vec<tokio::task::JoinHandle<Verdict>> {
    (0..CHECKS)
        .map(|_| {
            let (store, key) = (Arc::clone(store), Key::from(key));
            tokio::spawn(async move {
                store
                    .check_with(&key, &roomy(), 1, OnStoreError::default())
                    .await
                    .expect("the failure policy decides")
            })
        })
        .collect()
}

async fn fallbacks(tasks: Vec<tokio::task::JoinHandle<Verdict>>) -> usize {
    let mut fallbacks = 0;
    for task in tasks {
        match task.await.unwrap() {
            Verdict::Fallback(_) => fallbacks += 1,
            other => panic!("decided by Redis while it was down: {other:?}"),
        }
    }
    fallbacks
}

#[test]
fn redis_failing_mid_batch_fails_each_waiting_check_once() {
    limiter_tests::with_own_recorder(|snapshotter| async move {
        failing_mid_batch(&snapshotter).await;
    });
}

/// One check of `key` through `store`, decided by Redis: the connection
/// and the script are ready.
async fn decided_by_redis(store: &Guarded<RedisStore>, key: &str) {
    let warm = store
        .check_with(&Key::from(key), &roomy(), 1, OnStoreError::default())
        .await;
    assert!(matches!(warm, Ok(Verdict::Store(_))), "{warm:?}");
}

async fn failing_mid_batch(snapshotter: &Snapshotter) {
    let take_recorded = || take_recorded(snapshotter);
    let mut server = RedisServer::start();

    // Killed: the call in flight (one check) and the batch queued behind it
    // (every other check) both fail at once, each check exactly once.
    let store = guarded(&server.url(), Duration::from_secs(5));
    decided_by_redis(&store, "hot").await;
    take_recorded();
    server.signal("STOP");
    let tasks = hot_checks(&store, "hot").await;
    // The first check's call is in flight; every other check waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill();
    assert_eq!(fallbacks(tasks).await, CHECKS);
    let recorded = take_recorded();
    assert_eq!(
        recorded.fallbacks, CHECKS as u64,
        "the failure policy decided each check once"
    );
    assert_eq!(
        recorded.calls, 2,
        "one call in flight, one batch of the checks waiting: neither sent again"
    );
    assert_eq!(recorded.batch_sizes, [1.0, (CHECKS - 1) as f64]);

    // Hung: the call in flight and the waiting checks keep their deadline.
    let mut server = RedisServer::start();
    let deadline = Duration::from_millis(300);
    let store = guarded(&server.url(), deadline);
    decided_by_redis(&store, "hung").await;
    take_recorded();
    server.signal("STOP");
    let started = std::time::Instant::now();
    let tasks = hot_checks(&store, "hung").await;
    assert_eq!(fallbacks(tasks).await, CHECKS);
    // Each check waited its own deadline at most (plus scheduling).
    assert!(started.elapsed() < deadline * 3, "{:?}", started.elapsed());
    assert_eq!(take_recorded().fallbacks, CHECKS as u64);
    server.signal("CONT");
    server.kill();
}
