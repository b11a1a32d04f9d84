//! Sharding a hot key over the 3-master cluster, and sampling: the sub-keys
//! sit on distinct masters and never admit more than the limit in total;
//! sampling admits exactly its bound more, no more, in memory and on Redis
//! (standalone and the cluster).

use std::collections::BTreeSet;
use std::time::Duration;

use limiter_core::hot::shard_key;
use limiter_core::{HotKeys, Limiter, ManualClock, MemoryStore, Policy, Rule, Store};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisCluster, RedisServer};

#[tokio::test]
async fn shards_sit_on_distinct_masters_and_never_exceed_the_limit() {
    let cluster = RedisCluster::start();
    let store = cluster.store().await;
    let key = "rate_limit:global:trending";
    let masters: BTreeSet<usize> = (0..3)
        .map(|shard| cluster.owner_of(&shard_key(key, shard, 3)))
        .collect();
    assert_eq!(masters.len(), 3, "shards on masters {masters:?}");

    let policy = Policy::fixed_window(Rule::new(30, Duration::from_secs(60)).unwrap())
        .with_shards(3)
        .unwrap();
    // Two instances, each taking the shards in turn.
    let instances = [Limiter::new(store.clone()), Limiter::new(store)];
    let mut allowed = 0;
    for round in 0..25 {
        for limiter in &instances {
            if round % 3 == 0 && std::ptr::eq(limiter, &instances[1]) {
                continue;
            }
            if limiter
                .check("global:trending", &policy)
                .await
                .unwrap()
                .allowed()
            {
                allowed += 1;
            }
        }
    }
    // 42 requests, 14 per shard: each shard admits its 10.
    assert_eq!(allowed, 30);
    let per_master: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.command(&["DBSIZE"]).trim().parse().unwrap())
        .collect();
    assert_eq!(per_master, [1, 1, 1]);
}

/// Sampling on `limiter`: exactly the limit plus `k - 1` in a window, then
/// denials. `next_window` moves past the window that began when the last
/// call of `next_window` returned (or at the start).
async fn sampling_admits_exactly_its_bound<S: Store>(
    limiter: Limiter<S>,
    mut next_window: impl AsyncFnMut(),
) {
    let policy = Policy::fixed_window(Rule::new(100, WINDOW).unwrap())
        .with_sampling(10)
        .unwrap();
    let admitted = async |requests: usize| {
        let mut allowed = 0;
        for _ in 0..requests {
            if limiter.check("views", &policy).await.unwrap().allowed() {
                allowed += 1;
            }
        }
        allowed
    };
    // Window 1: samples at the 1st, 11th, ... 91st request (10 × 10 = 100
    // counted); the 91st prepaid nine more that never came.
    assert_eq!(admitted(91).await, 91);
    next_window().await;
    // Window 2: those nine, then ten samples counting 100, each with nine
    // more: 9 + 100 = 109 = the limit + (10 - 1). The next sample is denied.
    assert_eq!(admitted(109).await, 109);
    assert_eq!(admitted(1).await, 0);
    // A denial decides the following requests until its retry time.
    assert_eq!(admitted(20).await, 0);
    next_window().await;
    assert_eq!(admitted(100).await, 100);
}

const WINDOW: Duration = Duration::from_secs(1);

#[tokio::test]
async fn sampling_admits_at_most_every_minus_one_extra_per_window() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let store = MemoryStore::with_clock(clock.clone());
    let limiter = Limiter::from_hot_keys(HotKeys::with_clock(store, clock.clone()));
    sampling_admits_exactly_its_bound(limiter, async || clock.advance(WINDOW)).await;
}

/// Sampled checks go to Redis at Redis's own time: the next window is a
/// real one away. A key's fixed window starts at its first check, a few
/// milliseconds after the phase before it starts; a phase takes far less
/// than the window.
async fn sampling_on_real_time<S: Store>(store: S) {
    let mut phase = tokio::time::Instant::now();
    let next_window = async || {
        tokio::time::sleep_until(phase + WINDOW + Duration::from_millis(500)).await;
        phase = tokio::time::Instant::now();
    };
    sampling_admits_exactly_its_bound(Limiter::new(store), next_window).await;
}

#[tokio::test]
async fn sampling_on_redis_admits_exactly_as_in_memory() {
    let server = RedisServer::start();
    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&server.url(), config)
        .await
        .unwrap();
    sampling_on_real_time(store).await;
    let cluster = RedisCluster::start();
    sampling_on_real_time(cluster.store().await).await;
}
