//! Exactness under concurrency: 1,000 concurrent checks of one key with room
//! for exactly 100 give exactly 100 allowed, on Redis through 4 separate
//! connections and on the memory store through many tasks, for every algorithm.

use std::time::Duration;

use limiter_core::{Key, MemoryStore, Policy, Rate, Rule, Store};
use tokio::task::JoinSet;

const CHECKS: usize = 1_000;
const LIMIT: u64 = 100;

/// Policies with room for exactly `LIMIT` requests during the test: windows
/// and refill times far longer than the test takes. The sliding window uses
/// the longest window so no window boundary falls inside the test.
fn policies() -> Vec<Policy> {
    let day = Duration::from_secs(86_400);
    let slow = Rate::new(1, day).unwrap();
    vec![
        Policy::sliding_log([Rule::new(LIMIT, Duration::from_secs(60)).unwrap()]).unwrap(),
        Policy::fixed_window(Rule::new(LIMIT, Duration::from_secs(60)).unwrap()),
        Policy::sliding_window(Rule::new(LIMIT, limiter_core::MAX_WINDOW).unwrap()),
        Policy::token_bucket(slow, LIMIT).unwrap(),
        Policy::leaky_bucket(slow, LIMIT).unwrap(),
        Policy::gcra(slow, LIMIT).unwrap(),
    ]
}

/// Runs `CHECKS` checks of `key` at once, spread round-robin over `stores`,
/// and counts the allowed ones.
async fn allowed_of<S: Store + Clone>(stores: &[S], key: &str, policy: &Policy) -> usize {
    let mut tasks = JoinSet::new();
    for i in 0..CHECKS {
        let (store, key, policy) = (
            stores[i % stores.len()].clone(),
            Key::from(key),
            policy.clone(),
        );
        tasks.spawn(async move { store.check(&key, &policy, 1).await.unwrap().allowed() });
    }
    tasks
        .join_all()
        .await
        .into_iter()
        .filter(|&allowed| allowed)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_passes_on_redis_through_four_connections() {
    let redis = limiter_tests::redis();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(redis.store().await);
    }
    for policy in policies() {
        let key = redis.key(policy.algorithm().name());
        assert_eq!(
            allowed_of(&stores, &key, &policy).await,
            LIMIT as usize,
            "{}",
            policy.algorithm()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_passes_on_redis_cluster_through_four_connections() {
    let cluster = limiter_tests::RedisCluster::start();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(cluster.store().await);
    }
    for policy in policies() {
        // Keys on each of the three masters.
        for user in ["laoqian", "xiaoming", "xiaohong"] {
            let key = format!("{user}:{}", policy.algorithm().name());
            assert_eq!(
                allowed_of(&stores, &key, &policy).await,
                LIMIT as usize,
                "{} on node {}",
                policy.algorithm(),
                cluster.owner_of(&key)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_passes_in_memory() {
    let store = MemoryStore::new();
    for policy in policies() {
        let key = policy.algorithm().name();
        assert_eq!(
            allowed_of(std::slice::from_ref(&store), key, &policy).await,
            LIMIT as usize,
            "{}",
            policy.algorithm()
        );
    }
}
