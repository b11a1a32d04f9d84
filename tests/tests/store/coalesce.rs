//! Coalesced checks are exact: a batch of k requests decides each as k
//! checks one after another at the same time would (differential, against
//! the memory store and the reference model, every algorithm, random
//! costs), and many concurrent checks of one hot key from several
//! instances admit exactly the limit, on a standalone Redis and a cluster.

use crate::differential::{Reference, params};

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_conformance::Params;
use limiter_core::{Decision, Key, Limiter, Policy, Rate, Rule, Store};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::at::{self, At};
use limiter_tests::property::each_case_on;
use limiter_tests::{RedisCluster, RedisServer, TestRedis};
use params::params;
use proptest::prelude::*;

const T0: u64 = 1_750_000_000_000_000;
const KEYS: usize = 2;

/// Batches: the time step before, the key, the costs of its requests.
type Batch = (u64, usize, Vec<u64>);

fn case() -> impl Strategy<Value = (Params, Vec<Batch>)> {
    params().prop_flat_map(|params| {
        let longest = params.span_us();
        let cost = prop_oneof![2 => Just(1u64), 1 => 1..=params.max_cost()];
        let batch = (
            prop_oneof![2 => Just(0u64), 3 => 0..=longest / 4, 1 => 0..=longest * 2],
            0..KEYS,
            prop::collection::vec(cost, 1..16),
        );
        (Just(params), prop::collection::vec(batch, 1..12))
    })
}

async fn run_case(
    redis: &At<RedisStore>,
    prefix: &str,
    (params, batches): (Params, Vec<Batch>),
) -> Result<(), TestCaseError> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let case = CASE.fetch_add(1, Ordering::Relaxed);
    let policy = params.policy();
    let mut reference = Reference::new(KEYS);
    let mut now = T0;
    for (b, (advance, key, costs)) in batches.iter().enumerate() {
        now += advance;
        let name = format!("{prefix}:batch{case}:k{key}");
        let from_redis = redis
            .check_batch_at(&name, &policy, costs, now)
            .await
            .unwrap();
        prop_assert_eq!(from_redis.len(), costs.len());
        for (i, (&cost, from_redis)) in costs.iter().zip(&from_redis).enumerate() {
            let at = format_args!("batch {b} request {i} (costs {costs:?})");
            reference.agrees(
                (&policy, &params),
                (*key, &name),
                (cost, now),
                from_redis,
                at,
            )?;
        }
    }
    Ok(())
}

#[test]
fn a_batch_decides_as_checks_one_after_another_at_the_same_time() {
    let test_redis: TestRedis = limiter_tests::redis();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime.block_on(At::redis(test_redis.url(), at::patient()));
    each_case_on(&runtime, 256, case(), |case| {
        run_case(&redis, test_redis.prefix(), case)
    });
}

#[test]
fn a_batch_on_a_cluster_decides_as_checks_one_after_another() {
    let cluster = RedisCluster::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (config, clock) = at::clocked(at::patient());
    let store = runtime.block_on(cluster.store_with(config));
    let redis = At { store, clock };
    each_case_on(&runtime, 96, case(), |case| {
        run_case(&redis, "cluster", case)
    });
}

/// Every algorithm with room for 100 requests now, and (for the rates)
/// hardly more before the test ends.
fn hundred_now() -> Vec<(&'static str, Policy)> {
    let hour = Duration::from_secs(3600);
    let day = Duration::from_secs(86_400);
    vec![
        (
            "sliding_log",
            Policy::sliding_log([Rule::new(100, hour).unwrap()]).unwrap(),
        ),
        (
            "fixed_window",
            Policy::fixed_window(Rule::new(100, hour).unwrap()),
        ),
        // A day's window: crossing a window's end during the test leaves the
        // previous count weighing more than 99 for a quarter of an hour.
        (
            "sliding_window",
            Policy::sliding_window(Rule::new(100, day).unwrap()),
        ),
        (
            "token_bucket",
            Policy::token_bucket(Rate::new(1, hour).unwrap(), 100).unwrap(),
        ),
        (
            "leaky_bucket",
            Policy::leaky_bucket(Rate::new(1, hour).unwrap(), 100).unwrap(),
        ),
        (
            "gcra",
            Policy::gcra(Rate::new(1, hour).unwrap(), 100).unwrap(),
        ),
    ]
}

/// How many of `n` checks at one instant a policy admits, as the memory
/// store decides them.
fn admitted_at_once(policy: &Policy, n: usize) -> usize {
    let memory = At::memory();
    (0..n)
        .filter(|_| memory.decide_at("k", policy, 1, T0).unwrap().allowed())
        .count()
}

/// 2,000 concurrent checks of one key from 4 instances (a `Limiter` each,
/// on connections of their own): exactly the limit is admitted.
async fn hot_key_admits_exactly_the_limit(stores: Vec<RedisStore>, prefix: &str) {
    const CHECKS: usize = 2_000;
    for (name, policy) in hundred_now() {
        let expected = admitted_at_once(&policy, CHECKS);
        assert_eq!(expected, 100, "{name}");
        let key = format!("{prefix}:hot:{name}");
        let limiters: Vec<_> = stores.iter().cloned().map(Limiter::new).collect();
        let mut tasks = Vec::new();
        for i in 0..CHECKS {
            let (limiter, key, policy) = (limiters[i % 4].clone(), key.clone(), policy.clone());
            tasks.push(tokio::spawn(async move {
                limiter.check(&key, &policy).await.unwrap().allowed()
            }));
        }
        let mut allowed = 0;
        for task in tasks {
            allowed += usize::from(task.await.unwrap());
        }
        assert_eq!(allowed, expected, "{name}");
    }
}

fn roomy_config() -> RedisConfig {
    // 2,000 checks queued on a loaded machine: room for scheduling.
    RedisConfig::new().response_timeout(Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hot_key_from_four_instances_admits_exactly_the_limit() {
    let redis = limiter_tests::redis();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(
            RedisStore::connect_with(redis.url(), roomy_config())
                .await
                .unwrap(),
        );
    }
    hot_key_admits_exactly_the_limit(stores, redis.prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hot_key_on_a_cluster_from_four_instances_admits_exactly_the_limit() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let mut stores = Vec::new();
    for _ in 0..4 {
        let seeds = urls.iter().map(String::as_str);
        stores.push(
            RedisStore::connect_cluster(seeds, roomy_config())
                .await
                .unwrap(),
        );
    }
    hot_key_admits_exactly_the_limit(stores, "cluster").await;
}

/// Concurrent checks of one cost at one caller's time, coalesced, decide
/// as many checks one after another: the same decisions, in some order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checks_at_one_time_get_the_decisions_of_sequential_ones() {
    // More than two batches' worth: the queue goes in several calls at once.
    const CHECKS: usize = 1_200;
    let redis = limiter_tests::redis();
    let store = At::redis(redis.url(), roomy_config()).await;
    for (name, policy) in hundred_now() {
        let key = redis.key(&format!("at-once:{name}"));
        let memory = At::memory();
        let mut expected: Vec<Decision> = (0..CHECKS)
            .map(|_| memory.decide_at(&key, &policy, 1, T0).unwrap())
            .collect();
        let tasks: Vec<_> = (0..CHECKS)
            .map(|_| {
                let (store, key, policy) = (store.clone(), key.clone(), policy.clone());
                tokio::spawn(async move { store.check_at(&key, &policy, 1, T0).await.unwrap() })
            })
            .collect();
        let mut decided = Vec::new();
        for task in tasks {
            decided.push(task.await.unwrap());
        }
        let order = |d: &Decision| format!("{d:?}");
        expected.sort_by_key(order);
        decided.sort_by_key(order);
        assert_eq!(decided, expected, "{name}");
    }
}

/// Turned off, every check is a call of its own, deciding the same.
#[tokio::test]
async fn coalescing_turned_off_decides_the_same() {
    let redis = limiter_tests::redis();
    let store = At::redis(redis.url(), RedisConfig::new().coalesce(false)).await;
    for (name, policy) in hundred_now() {
        let key = redis.key(&format!("direct:{name}"));
        let memory = At::memory();
        for _ in 0..120 {
            let expected = memory.decide_at(&key, &policy, 1, T0).unwrap();
            let decided = store.check_at(&key, &policy, 1, T0).await.unwrap();
            assert_eq!(decided, expected, "{name}");
        }
        assert!(store.check(&Key::from(&key), &policy, 1).await.is_ok());
    }
}

/// Callers that give up while queued (their futures dropped) are left out
/// of the batch and not counted; the first check's caller giving up while
/// its call is in flight counts (the call was sent), and the checks queued
/// behind it are still sent and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_giving_up_leave_the_batch_intact() {
    let server = RedisServer::start();
    let store = RedisStore::connect_with(&server.url(), roomy_config())
        .await
        .unwrap();
    let policy = Policy::fixed_window(Rule::new(1_000, Duration::from_secs(3600)).unwrap());
    let cancel = Key::from("cancel");
    let spawn_check = || {
        let (store, policy, cancel) = (store.clone(), policy.clone(), cancel.clone());
        tokio::spawn(async move { store.check(&cancel, &policy, 1).await.unwrap() })
    };
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    assert!(store.check(&cancel, &policy, 1).await.unwrap().allowed());

    // Hung: the first check's call stays in flight while the others queue.
    server.signal("STOP");
    let first = spawn_check();
    settle().await;
    let queued: Vec<_> = (0..100).map(|_| spawn_check()).collect();
    settle().await;
    let (kept, gave_up): (Vec<_>, Vec<_>) = queued
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    for (_, task) in &gave_up {
        task.abort();
    }
    settle().await;
    server.signal("CONT");
    assert_eq!(first.await.unwrap().remaining(), 998);
    let mut remaining = Vec::new();
    for (_, task) in kept {
        let decision = task.await.unwrap();
        assert!(decision.allowed());
        remaining.push(decision.remaining());
    }
    remaining.sort_unstable();
    assert_eq!(remaining, (948..998).collect::<Vec<_>>());
    let counted = server.command(&["HGET", "cancel", "c"]);
    assert_eq!(counted.trim(), "52", "the 50 that gave up were not counted");

    // The first check's caller gives up in flight: it was sent, so it
    // counts, and the checks queued behind it are answered all the same.
    server.signal("STOP");
    let first = spawn_check();
    settle().await;
    let queued: Vec<_> = (0..20).map(|_| spawn_check()).collect();
    settle().await;
    first.abort();
    settle().await;
    server.signal("CONT");
    let mut remaining = Vec::new();
    for task in queued {
        remaining.push(task.await.unwrap().remaining());
    }
    remaining.sort_unstable();
    assert_eq!(remaining, (927..947).collect::<Vec<_>>());
    let counted = server.command(&["HGET", "cancel", "c"]);
    assert_eq!(counted.trim(), "73");
}

/// A batch on a key holding another policy's state (another algorithm's
/// hash, a sorted set, a bucket in other units) reads it as one check would,
/// and leaves the state one check after another would: the checks after it
/// agree with the memory store.
#[tokio::test]
async fn a_batch_over_another_policys_state_decides_as_checks_one_at_a_time() {
    let redis = limiter_tests::redis();
    let store = At::redis(redis.url(), at::patient()).await;
    let us = Duration::from_micros;
    let log = Policy::sliding_log([Rule::new(5, us(90_000)).unwrap()]).unwrap();
    let fixed = Policy::fixed_window(Rule::new(6, us(50_000)).unwrap());
    let sliding = Policy::sliding_window(Rule::new(7, us(40_000)).unwrap());
    let bucket = Policy::token_bucket(Rate::new(3, us(30_000)).unwrap(), 5).unwrap();
    let other_units = Policy::token_bucket(Rate::new(7, us(20_000)).unwrap(), 4).unwrap();
    let leaky = Policy::leaky_bucket(Rate::new(2, us(10_000)).unwrap(), 6).unwrap();
    let gcra = Policy::gcra(Rate::new(5, us(25_000)).unwrap(), 4).unwrap();
    let all = [&log, &fixed, &sliding, &bucket, &other_units, &leaky, &gcra];
    let mut case = 0;
    for before in all {
        for after in all {
            case += 1;
            let key = redis.key(&format!("switch{case}"));
            let memory = At::memory();
            let mut now = T0;
            let both = async |policy: &Policy, cost: u64, now: u64| {
                let expected = memory.decide_at(&key, policy, cost, now).unwrap();
                let decided = store.check_at(&key, policy, cost, now).await.unwrap();
                assert_eq!(decided, expected, "case {case}");
            };
            for cost in [1, 2, 1] {
                now += 3_000;
                both(before, cost, now).await;
            }
            now += 1_000;
            let costs = [1, 3, 1, 1, 2, 1];
            let batch = store
                .check_batch_at(&key, after, &costs, now)
                .await
                .unwrap();
            for (&cost, decided) in costs.iter().zip(&batch) {
                let expected = memory.decide_at(&key, after, cost, now).unwrap();
                assert_eq!(decided, &expected, "case {case}: batch");
            }
            for step in [0, 700, 9_000, 45_000] {
                now += step;
                both(after, 1, now).await;
            }
        }
    }
}
