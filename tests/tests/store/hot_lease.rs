//! Quota leasing on real Redis (standalone and a 3-master cluster): several
//! `Limiter` instances, each with many tasks, never admit more than the
//! policy allows in any window (counted from the test's own log, on a
//! `ManualClock` the Redis store also decides at); unused permits go back
//! when a lease ends; a lease is never used after its end, Redis down or
//! not; a caller that gives up mid-fetch leaks nothing.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use limiter_core::{
    GuardConfig, Guarded, HotKeys, Lease, Limiter, ManualClock, OnStoreError, Policy, Rule, Store,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisCluster, RedisServer};
use redis::AsyncCommands;

const START: Duration = Duration::from_secs(1_900_000_000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn leased_log(limits: &[(u64, u64)], max: u64, ttl_ms: u64) -> Policy {
    let rules = limits.iter().map(|&(n, w)| Rule::new(n, ms(w)).unwrap());
    Policy::sliding_log(rules)
        .unwrap()
        .with_lease(Lease::new(max, ms(ttl_ms)).unwrap())
        .unwrap()
}

fn instance<S: Store>(store: S, clock: &ManualClock) -> Limiter<S> {
    Limiter::from_hot_keys(HotKeys::with_store_time(store, clock.clone()))
}

/// The most admissions any window `(t - w, t]` holds, over the log's times.
fn most_in_any_window(admitted: &[u64], window_us: u64) -> usize {
    let mut times = admitted.to_vec();
    times.sort_unstable();
    let mut first = 0;
    let mut most = 0;
    for (last, &t) in times.iter().enumerate() {
        while times[first] + window_us <= t {
            first += 1;
        }
        most = most.max(last + 1 - first);
    }
    most
}

/// Runs `steps` steps; at each, `per_step(step)` tasks per instance check at
/// once, then the clock moves on by `advance(step)`. Answers the times of
/// the admitted requests and the number of decisions.
async fn hammer<S: Store>(
    instances: &[Arc<Limiter<S>>],
    clock: &ManualClock,
    policy: &Policy,
    steps: u64,
    per_step: impl Fn(u64) -> u64,
    advance: impl Fn(u64) -> Duration,
) -> (Vec<u64>, usize) {
    let mut admitted = Vec::new();
    let mut decisions = 0;
    for step in 0..steps {
        let at = limiter_core::Clock::now_micros(clock);
        let mut tasks = Vec::new();
        for limiter in instances {
            for _ in 0..per_step(step) {
                let (limiter, policy) = (Arc::clone(limiter), policy.clone());
                tasks.push(tokio::spawn(async move {
                    limiter.check("trending", &policy).await
                }));
            }
        }
        for task in tasks {
            let decision = task.await.unwrap().expect("Redis is up");
            decisions += 1;
            if decision.allowed() {
                admitted.push(at);
            }
        }
        clock.advance(advance(step));
        // Let the lease tasks woken by the move run.
        tokio::task::yield_now().await;
    }
    (admitted, decisions)
}

async fn never_above_the_limit<S: Store + Clone>(store: S, calls: impl AsyncFn() -> u64) {
    let clock = ManualClock::new(START);
    // Two rules: 20 per 100 ms and 50 per second.
    let policy = leased_log(&[(20, 100), (50, 1000)], 8, 30);
    let instances: Vec<_> = (0..3)
        .map(|_| Arc::new(instance(store.clone(), &clock)))
        .collect();
    let before = calls().await;
    // Bursts, a steady trickle, idle stretches: every path of a lease.
    let (admitted, decisions) = hammer(
        &instances,
        &clock,
        &policy,
        400,
        |step| match step % 100 {
            0..40 => 6,
            40..70 => 1,
            70..80 => 0,
            _ => 3,
        },
        |step| ms(1 + step % 4),
    )
    .await;
    let calls = calls().await - before;
    let most = most_in_any_window(&admitted, 100_000);
    assert!(most <= 20, "{most} admitted in 100 ms");
    let most_per_second = most_in_any_window(&admitted, 1_000_000);
    assert!(most_per_second <= 50, "{most_per_second} admitted in 1 s");
    // The limit is reached, and leases spared most calls.
    assert_eq!(most_per_second, 50);
    assert!(
        (calls as usize) * 2 < decisions,
        "{calls} calls for {decisions} decisions"
    );
}

/// The most admissions of one fixed window: a window starts at the first
/// admission after the previous one ended (every step's requests, the
/// fetch of a lease included, happen at one time, so the key's first call
/// after a window is also its first admission).
fn most_in_a_fixed_window(admitted: &[u64], window_us: u64) -> usize {
    let mut times = admitted.to_vec();
    times.sort_unstable();
    let (mut start, mut count, mut most) = (None::<u64>, 0, 0);
    for t in times {
        match start {
            Some(s) if t < s + window_us => count += 1,
            _ => (start, count) = (Some(t), 1),
        }
        most = most.max(count);
    }
    most
}

async fn fixed_window_never_above_the_limit<S: Store + Clone>(store: S) {
    let clock = ManualClock::new(START);
    let policy = Policy::fixed_window(Rule::new(20, ms(100)).unwrap())
        .with_lease(Lease::new(8, ms(30)).unwrap())
        .unwrap();
    let instances: Vec<_> = (0..3)
        .map(|_| Arc::new(instance(store.clone(), &clock)))
        .collect();
    let (admitted, _) = hammer(
        &instances,
        &clock,
        &policy,
        300,
        |step| if step % 50 < 35 { 4 } else { 1 },
        |step| ms(1 + step % 3),
    )
    .await;
    assert_eq!(most_in_a_fixed_window(&admitted, 100_000), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_leases_never_admit_more_than_the_limit() {
    let server = RedisServer::start();
    fixed_window_never_above_the_limit(RedisStore::connect(&server.url()).await.unwrap()).await;
    let cluster = RedisCluster::start();
    fixed_window_never_above_the_limit(cluster.store().await).await;
}

async fn evalsha_calls(url: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut connection)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_leases_never_admit_more_than_the_limit_in_any_window() {
    let server = RedisServer::start();
    let url = server.url();
    let store = RedisStore::connect_with(&url, RedisConfig::new().response_timeout(ms(5000)))
        .await
        .unwrap();
    never_above_the_limit(store, async || evalsha_calls(&url).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_leases_never_admit_more_than_the_limit_in_any_window() {
    let cluster = RedisCluster::start();
    let store = cluster.store().await;
    let urls = cluster.urls();
    never_above_the_limit(store, async || {
        let mut total = 0;
        for url in &urls {
            total += evalsha_calls(url).await;
        }
        total
    })
    .await;
}

/// The log's entries, less the marker.
async fn entries(url: &str, key: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let all: u64 = connection.zcard(key).await.unwrap();
    let marker: Option<f64> = connection.zscore(key, "~").await.unwrap();
    all - u64::from(marker.is_some())
}

/// Waits (real time, bounded) until the log holds `expected` entries.
async fn until_entries(url: &str, key: &str, expected: u64) {
    for _ in 0..500 {
        if entries(url, key).await == expected {
            return;
        }
        tokio::time::sleep(ms(10)).await;
    }
    assert_eq!(entries(url, key).await, expected);
}

async fn check(limiter: &Limiter<impl Store>, policy: &Policy) -> bool {
    limiter.check("trending", policy).await.unwrap().allowed()
}

/// A log of 10 a second leased in bulk (up to 8 permits, for 50 ms), on
/// a Redis of its own, through one instance on a manual clock.
struct LeasedLog {
    server: RedisServer,
    store: RedisStore,
    clock: ManualClock,
    policy: Policy,
    limiter: Limiter<RedisStore>,
}

impl LeasedLog {
    const KEY: &str = "rate_limit:trending";

    async fn start() -> Self {
        let server = RedisServer::start();
        let store = RedisStore::connect(&server.url()).await.unwrap();
        let clock = ManualClock::new(START);
        let limiter = instance(store.clone(), &clock);
        let policy = leased_log(&[(10, 1000)], 8, 50);
        Self {
            server,
            store,
            clock,
            policy,
            limiter,
        }
    }

    /// The entries Redis holds for the key.
    async fn entries(&self) -> u64 {
        entries(&self.server.url(), Self::KEY).await
    }

    /// The lease ends: its unused permits go back, leaving `left` entries;
    /// then another instance gets exactly the rest of the limit.
    async fn assert_the_lease_ends_leaving(&self, left: u64) {
        self.clock.advance(ms(50));
        until_entries(&self.server.url(), Self::KEY, left).await;
        let other = instance(self.store.clone(), &self.clock);
        for _ in left..10 {
            assert!(check(&other, &self.policy).await);
        }
        assert!(!check(&other, &self.policy).await);
    }
}

#[tokio::test]
async fn unused_permits_go_back_when_the_lease_ends() {
    let leased = LeasedLog::start().await;
    // 1: cold, direct. 2: a lease of 2 (the rate so far). 3: its second
    // permit. 4: a lease of 4, one used.
    for _ in 0..4 {
        assert!(check(&leased.limiter, &leased.policy).await);
    }
    assert_eq!(leased.entries().await, 7);
    // Its three unused permits go back.
    leased.assert_the_lease_ends_leaving(4).await;
}

#[tokio::test]
async fn a_lease_is_never_used_after_its_end_even_with_redis_down() {
    let mut server = RedisServer::start();
    let config = RedisConfig::new().response_timeout(ms(200));
    let store = RedisStore::connect_with(&server.url(), config)
        .await
        .unwrap();
    let clock = ManualClock::new(START);
    let policy = leased_log(&[(100, 1000)], 8, 50);
    let limiter = instance(store, &clock);
    // 1 direct, 2 and 3 from a lease of 2, 4 from a lease of 4: 3 left.
    for _ in 0..4 {
        assert!(check(&limiter, &policy).await);
    }
    server.kill();
    // Within the lease: answered locally.
    clock.advance(ms(49));
    assert!(check(&limiter, &policy).await);
    // At its end: never from the lease, so the store's failure shows.
    clock.advance(ms(1));
    let after_end = limiter.check("trending", &policy).await;
    assert!(after_end.is_err(), "{after_end:?}");
}

#[tokio::test]
async fn the_failure_policy_decides_when_no_lease_can_be_had() {
    let mut server = RedisServer::start();
    let redis =
        RedisStore::open_with(&server.url(), RedisConfig::new().response_timeout(ms(200))).unwrap();
    let guard = GuardConfig {
        on_store_error: OnStoreError::FailClosed,
        ..GuardConfig::default()
    };
    let clock = ManualClock::new(START);
    let policy = leased_log(&[(100, 1000)], 8, 50);
    let limiter = instance(Guarded::new(redis, guard), &clock);
    for _ in 0..4 {
        assert!(check(&limiter, &policy).await);
    }
    server.kill();
    clock.advance(ms(50));
    let failed = limiter.check("trending", &policy).await;
    assert!(
        matches!(failed, Err(limiter_core::Error::Unavailable(_))),
        "{failed:?}"
    );
}

#[tokio::test]
async fn a_caller_that_gives_up_mid_fetch_leaks_no_permit() {
    let leased = LeasedLog::start().await;
    let (limiter, policy) = (&leased.limiter, &leased.policy);
    // 1 direct, 2 and 3 from a lease of 2: three entries.
    for _ in 0..3 {
        assert!(check(limiter, policy).await);
    }
    assert_eq!(leased.entries().await, 3);
    // The 4th starts a fetch (a lease of 4, the rate) and is dropped while
    // it waits for it.
    {
        let mut gave_up = Box::pin(limiter.check("trending", policy));
        let polled = gave_up
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(polled, Poll::Pending));
    }
    until_entries(&leased.server.url(), LeasedLog::KEY, 7).await;
    // The fetched lease serves the next caller: no entry more.
    assert!(check(limiter, policy).await);
    assert_eq!(leased.entries().await, 7);
    // At its end, its three unused permits go back: nothing counted twice.
    leased.assert_the_lease_ends_leaving(4).await;
}
