//! A region's own Redis killed and restarted: once it is back, the
//! regional store's decisions return to it at the guard's next probe. The
//! first check after a quiet period must find a fresh connection, not the
//! error of the connection that died with the old server; otherwise the
//! breaker stays open another probe interval and the fallback grants a
//! whole local quota on top of what Redis counts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use limiter_core::{BreakerState, GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Verdict};
use limiter_regional::{Region, RegionalConfig, RegionalStore};
use limiter_tests::RedisServer;
use tokio::task::JoinSet;

const QUOTA: u64 = 30;
const WINDOW: Duration = Duration::from_secs(1);
/// Generous for a loaded 2-core machine: what is tested fails at once (a
/// refused or closed connection), never by a deadline.
const DEADLINE: Duration = Duration::from_secs(1);

fn thirty_a_second() -> Policy {
    Policy::fixed_window(Rule::new(QUOTA, WINDOW).unwrap())
}

/// The wall clock (the Redis servers' clock: same machine), in µs.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Sleeps until `into` past the next whole second.
async fn next_second(into: Duration) {
    let second = WINDOW.as_micros() as u64;
    let left = second - now_us() % second;
    tokio::time::sleep(Duration::from_micros(left) + into).await;
}

/// What one window (second) saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    sent: u64,
    admitted: u64,
    /// Decided by the region's Redis, or the deny cache remembering its denial.
    redis: u64,
    fallback: u64,
}

impl Tally {
    fn add(&mut self, verdict: &Verdict) {
        self.sent += 1;
        self.admitted += u64::from(verdict.allowed());
        match verdict {
            Verdict::Store(_) | Verdict::Cached(_) => self.redis += 1,
            Verdict::Fallback(_) => self.fallback += 1,
            other => panic!("the default policy falls back, never {other:?}"),
        }
    }
}

/// Who decided, and how.
fn name(verdict: &Verdict) -> String {
    let how = if verdict.allowed() {
        "allowed"
    } else {
        "denied"
    };
    match verdict {
        Verdict::Store(_) => format!("Redis ({how})"),
        Verdict::Cached(_) => format!("the deny cache ({how})"),
        Verdict::Fallback(_) => format!("the fallback ({how})"),
        other => format!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regions_redis_back_after_a_quiet_period_decides_the_first_check() {
    // Counted per second of the wall clock: not beside the backlog's load.
    let _turn = crate::regional_world::ONE_AT_A_TIME.lock().await;
    let mut local = RedisServer::start();
    let peer = RedisServer::start();
    let store = RegionalStore::with_config(
        Region::open("north", &local.url()).unwrap(),
        [Region::open("south", &peer.url()).unwrap()],
        RegionalConfig::new()
            .local_deadline(DEADLINE)
            .peer_deadline(DEADLINE),
    )
    .unwrap();
    // As the UGC server guards its regional route (`LimiterLayer::guard`):
    // the default breaker and failure policy (a local fallback).
    let guarded = Guarded::new(
        store.clone(),
        GuardConfig {
            deadline: DEADLINE,
            ..GuardConfig::default()
        },
    );
    let policy = thirty_a_second();
    let check = |key: &'static str| {
        let (guarded, policy) = (guarded.clone(), policy.clone());
        async move {
            guarded
                .check_with(&Key::from(key), &policy, 1, OnStoreError::default())
                .await
                .expect("the failure policy always decides")
        }
    };
    assert!(matches!(check("warm-up").await, Verdict::Store(_)));

    // Down: the guard's breaker opens after its consecutive failures.
    local.kill();
    let mut failures = 0;
    while guarded.breaker_state() != BreakerState::Open {
        assert!(matches!(check("down").await, Verdict::Fallback(_)));
        failures += 1;
        assert!(failures <= 3, "the breaker did not open");
    }
    // Back, empty, and left alone for a while.
    local.restart();
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Load in the next two whole seconds (windows of the Redis clock):
    // the first check, 100 at once, then 10 every 50 ms, none sent in a
    // second's last 50 ms so each request's window is the second it was
    // sent in.
    next_second(Duration::from_millis(10)).await;
    let first_second = now_us() / 1_000_000;
    let first = check("search").await;
    let mut windows = [Tally::default(); 2];
    windows[0].add(&first);
    let mut burst = 100;
    loop {
        let sent_at = now_us();
        let window = (sent_at / 1_000_000 - first_second) as usize;
        if window >= windows.len() {
            break;
        }
        if sent_at % 1_000_000 < 950_000 {
            let mut checks = JoinSet::new();
            for _ in 0..burst {
                checks.spawn(check("search"));
            }
            while let Some(verdict) = checks.join_next().await {
                windows[window].add(&verdict.unwrap());
            }
            assert_eq!(
                (now_us() / 1_000_000 - first_second) as usize,
                window,
                "a burst ran past its second: the machine is too slow for this test"
            );
        }
        burst = 10;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("first check after the quiet period: {}", name(&first));
    println!(
        "per second: {windows:?}; breaker {:?}",
        guarded.breaker_state()
    );

    assert!(
        matches!(first, Verdict::Store(d) if d.allowed()),
        "Redis is up: it decides the first check after the quiet period, not {}",
        name(&first)
    );
    for (i, tally) in windows.iter().enumerate() {
        assert!(
            tally.fallback == 0 && tally.admitted <= QUOTA,
            "second {i}: Redis decides every check, admitting at most the quota: {tally:?}"
        );
    }
}
