//! Checks of distinct keys batched into one call while another is in
//! flight: the script of several keys decides each key as checks one after
//! another at the same time would (differential, against the memory store
//! and the reference model, every algorithm); checks meeting a call in
//! flight go together in the next call, a caller that gave up is left out
//! of it, Redis killed meanwhile fails each check once; and many tasks over
//! many keys admit exactly each key's limit. On a Cluster, checks queue per
//! node and a call reaches keys of several slots of its node; a key the
//! node does not serve, or that migrated away, is checked again on its own.

use crate::coalesce_failure::take_recorded;
use crate::differential::{Reference, params};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_conformance::Params;
use limiter_core::{
    GuardConfig, Guarded, Key, Limiter, OnStoreError, Policy, Rate, Rule, Store, Verdict,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::at::{self, At};
use limiter_tests::property::each_case_on;
use limiter_tests::{RedisCluster, RedisServer, TestRedis};
use metrics_util::debugging::Snapshotter;
use params::params;
use proptest::prelude::*;

const T0: u64 = 1_750_000_000_000_000;
const KEYS: usize = 4;

/// Calls: the time step before, the keys checked (by index, repeats
/// allowed), the cost of each check.
type Call = (u64, Vec<usize>, u64);

fn case() -> impl Strategy<Value = (Params, Vec<Call>)> {
    params().prop_flat_map(|params| {
        let longest = params.span_us();
        let cost = prop_oneof![2 => Just(1u64), 1 => 1..=params.max_cost()];
        let call = (
            prop_oneof![
                2 => Just(0u64),
                3 => 0..=longest / 4,
                1 => 0..=longest * 2,
                1 => params::edge(&params),
            ],
            prop::collection::vec(0..KEYS, 1..10),
            cost,
        );
        (Just(params), prop::collection::vec(call, 1..12))
    })
}

#[test]
fn checks_of_several_keys_in_one_call_decide_as_checks_one_after_another() {
    let test_redis: TestRedis = limiter_tests::redis();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime.block_on(At::redis(test_redis.url(), at::patient()));
    let prefix = test_redis.prefix().to_owned();
    static CASE: AtomicU64 = AtomicU64::new(0);
    each_case_on(&runtime, 256, case(), |(params, calls)| {
        let (redis, prefix) = (&redis, &prefix);
        async move {
            let case = CASE.fetch_add(1, Ordering::Relaxed);
            let policy = params.policy();
            let mut reference = Reference::new(KEYS);
            let mut now = T0;
            for (c, (advance, keys, cost)) in calls.iter().enumerate() {
                now += advance;
                let names: Vec<String> = (keys.iter())
                    .map(|key| format!("{prefix}:keys{case}:k{key}"))
                    .collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let from_redis = redis.check_keys_at(&names, &policy, *cost, now).await;
                let from_redis = from_redis.unwrap();
                prop_assert_eq!(from_redis.len(), keys.len());
                for (i, (&key, from_redis)) in keys.iter().zip(&from_redis).enumerate() {
                    let at = format_args!("call {c} check {i} (keys {keys:?}, cost {cost})");
                    reference.agrees(
                        (&policy, &params),
                        (key, names[i]),
                        (*cost, now),
                        from_redis,
                        at,
                    )?;
                }
            }
            Ok(())
        }
    });
}

/// The seeds' default: 10 a minute and 20 in two.
fn default_log() -> Policy {
    Policy::sliding_log([
        Rule::new(10, Duration::from_secs(60)).unwrap(),
        Rule::new(20, Duration::from_secs(120)).unwrap(),
    ])
    .unwrap()
}

/// The sizes of the check calls sent since the last call.
fn batch_sizes(snapshotter: &Snapshotter) -> Vec<f64> {
    take_recorded(snapshotter).batch_sizes
}

/// While Redis is stopped, a check's call is in flight: ten checks of ten
/// other keys queue behind it and go in one call once Redis goes on, and a
/// check whose caller gave up while it waited is left out (its key holds
/// nothing); checks under two policies go in one call each.
#[test]
fn checks_meeting_a_call_in_flight_go_in_the_next_call_and_a_gone_caller_is_left_out() {
    limiter_tests::with_own_recorder(|snapshotter| async move {
        meeting_a_call_in_flight(&snapshotter).await;
    });
}

async fn meeting_a_call_in_flight(snapshotter: &Snapshotter) {
    let server = RedisServer::start();
    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&server.url(), config).await;
    let limiter = Limiter::new(store.unwrap());
    let policy = default_log();
    // The connection made, the first script loaded.
    assert!(limiter.check("warm", &policy).await.unwrap().allowed());
    batch_sizes(snapshotter);

    server.signal("STOP");
    let check = |key: &str| {
        let (limiter, policy, key) = (limiter.clone(), policy.clone(), key.to_owned());
        tokio::spawn(async move { limiter.check(&key, &policy).await.unwrap() })
    };
    let first = check("first");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let others: Vec<_> = (0..10).map(|i| check(&format!("other{i}"))).collect();
    let gone = check("gone");
    tokio::time::sleep(Duration::from_millis(50)).await;
    gone.abort();
    tokio::time::sleep(Duration::from_millis(10)).await;
    server.signal("CONT");

    assert!(first.await.unwrap().allowed());
    for other in others {
        let decision = other.await.unwrap();
        assert!(decision.allowed());
        assert_eq!(decision.remaining(), 9);
    }
    // The first check's own call, then one for the ten (its script loaded
    // on the way): nothing for the caller that left.
    assert_eq!(batch_sizes(snapshotter), [1.0, 10.0]);
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let held: Vec<bool> = redis::pipe()
        .exists("rate_limit:gone")
        .exists("rate_limit:other9")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(held, [false, true]);

    // Checks under two policies (two algorithms) meeting a call in flight
    // go in one call per policy.
    let gcra = Policy::gcra(Rate::new(1, Duration::from_secs(60)).unwrap(), 5).unwrap();
    server.signal("STOP");
    let first = check("second first");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mixed: Vec<_> = (0..8)
        .map(|i| {
            let policy = if i % 2 == 0 {
                default_log()
            } else {
                gcra.clone()
            };
            let (limiter, key) = (limiter.clone(), format!("mixed{i}"));
            tokio::spawn(async move { (i, limiter.check(&key, &policy).await.unwrap()) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.signal("CONT");
    assert!(first.await.unwrap().allowed());
    for check in mixed {
        let (i, decision) = check.await.unwrap();
        assert!(decision.allowed());
        assert_eq!(decision.remaining(), if i % 2 == 0 { 9 } else { 4 }, "{i}");
    }
    assert_eq!(batch_sizes(snapshotter), [1.0, 4.0, 4.0]);
}

/// Redis killed while a check's call is in flight and ten checks of other
/// keys wait behind it: each check gets the failure policy's decision
/// once, and neither call is sent again.
#[test]
fn redis_killed_mid_batch_fails_each_waiting_check_once() {
    limiter_tests::with_own_recorder(|snapshotter| async move {
        killed_mid_batch(&snapshotter).await;
    });
}

async fn killed_mid_batch(snapshotter: &Snapshotter) {
    let mut server = RedisServer::start();
    let deadline = Duration::from_secs(5);
    let config = RedisConfig::new().response_timeout(deadline);
    let redis = RedisStore::open_with(&server.url(), config).unwrap();
    let guard = GuardConfig {
        deadline,
        ..GuardConfig::default()
    };
    let store = Arc::new(Guarded::new(redis, guard));
    let policy = default_log();
    let warm = Key::from("warm");
    let warm = store.check_with(&warm, &policy, 1, OnStoreError::default());
    assert!(matches!(warm.await, Ok(Verdict::Store(_))));
    batch_sizes(snapshotter);

    server.signal("STOP");
    let check = |key: String| {
        let (store, policy) = (Arc::clone(&store), policy.clone());
        let key = Key::from(key);
        tokio::spawn(async move {
            let verdict = store.check_with(&key, &policy, 1, OnStoreError::default());
            verdict.await.expect("the failure policy decides")
        })
    };
    let first = check("first".into());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut checks: Vec<_> = (0..10).map(|i| check(format!("other{i}"))).collect();
    checks.push(first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.kill();
    for check in checks {
        let verdict = check.await.unwrap();
        assert!(matches!(verdict, Verdict::Fallback(_)), "{verdict:?}");
    }
    assert_eq!(batch_sizes(snapshotter), [1.0, 10.0]);
}

/// 4 instances of 64 tasks each check 50 keys 15 times each at once: every
/// key admits exactly its 10, batched or not, on one Redis and on a Cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_over_many_keys_admit_exactly_each_keys_limit() {
    let redis = limiter_tests::redis();
    let cluster = RedisCluster::start();
    for coalesce in [true, false] {
        let config = || {
            (RedisConfig::new())
                .response_timeout(Duration::from_secs(5))
                .coalesce(coalesce)
        };
        let mut standalone = Vec::new();
        let mut clustered = Vec::new();
        for _ in 0..4 {
            let store = RedisStore::connect_with(redis.url(), config())
                .await
                .unwrap();
            standalone.push(Limiter::new(store));
            clustered.push(Limiter::new(cluster.store_with(config()).await));
        }
        let prefix = format!("{}:many:{coalesce}", redis.prefix());
        admit_exactly(&standalone, &prefix).await;
        admit_exactly(&clustered, &format!("many:{coalesce}")).await;
    }
}

async fn admit_exactly(limiters: &[Limiter<RedisStore>], prefix: &str) {
    const KEYS: usize = 50;
    const CHECKS_PER_KEY: usize = 15;
    {
        let policy = default_log();
        let mut tasks = Vec::new();
        for task in 0..256 {
            let (limiter, policy) = (limiters[task % 4].clone(), policy.clone());
            let prefix = prefix.to_owned();
            tasks.push(tokio::spawn(async move {
                let mut allowed = vec![0usize; KEYS];
                // The task's share of the checks, spread over every key.
                for n in (task..KEYS * CHECKS_PER_KEY).step_by(256) {
                    let key = n % KEYS;
                    let decision = limiter.check(&format!("{prefix}:k{key}"), &policy).await;
                    allowed[key] += usize::from(decision.unwrap().allowed());
                }
                allowed
            }));
        }
        let mut allowed = vec![0usize; KEYS];
        for task in tasks {
            for (total, some) in allowed.iter_mut().zip(task.await.unwrap()) {
                *total += some;
            }
        }
        assert_eq!(allowed, vec![10; KEYS], "{prefix}");
    }
}

/// On a Cluster, while node 0 is stopped with a check's call in flight,
/// checks of ten other keys of that node, in ten slots, queue and go in one
/// call to it; a check of a key of another node goes on its own at once.
#[test]
fn on_a_cluster_checks_meeting_a_call_in_flight_go_in_one_call_to_their_node() {
    limiter_tests::with_own_recorder(|snapshotter| async move {
        on_a_cluster(&snapshotter).await;
    });
}

/// `n` keys of users whose key `Limiter::check` sends to node `node`.
fn keys_on(cluster: &RedisCluster, node: usize, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("user{i}"))
        .filter(|key| cluster.owner_of(&format!("rate_limit:{key}")) == node)
        .take(n)
        .collect()
}

async fn on_a_cluster(snapshotter: &Snapshotter) {
    let cluster = RedisCluster::start();
    let limiter = Limiter::new(cluster.store().await);
    let policy = default_log();
    let on_node_0 = keys_on(&cluster, 0, 12);
    let elsewhere = keys_on(&cluster, 1, 1).remove(0);
    // The connections made, the slots known, the check's script loaded.
    assert!(
        limiter
            .check(&on_node_0[0], &policy)
            .await
            .unwrap()
            .allowed()
    );
    assert!(limiter.check(&elsewhere, &policy).await.unwrap().allowed());
    batch_sizes(snapshotter);

    cluster.nodes[0].signal("STOP");
    let check = |key: &str| {
        let (limiter, policy, key) = (limiter.clone(), policy.clone(), key.to_owned());
        tokio::spawn(async move { limiter.check(&key, &policy).await.unwrap() })
    };
    let first = check(&on_node_0[1]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let others: Vec<_> = on_node_0[2..].iter().map(|key| check(key)).collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Node 1 is not held up by node 0's queue.
    let decision = limiter.check(&elsewhere, &policy).await.unwrap();
    assert_eq!(decision.remaining(), 8);
    // The first check's call to node 0 (in flight), and node 1's.
    assert_eq!(batch_sizes(snapshotter), [1.0, 1.0]);
    cluster.nodes[0].signal("CONT");

    assert!(first.await.unwrap().allowed());
    for other in others {
        assert_eq!(other.await.unwrap().remaining(), 9);
    }
    assert_eq!(batch_sizes(snapshotter), [10.0]);
    let slots: std::collections::BTreeSet<String> = (on_node_0[2..].iter())
        .map(|key| {
            let key = format!("rate_limit:{key}");
            assert_eq!(cluster.nodes[0].command(&["EXISTS", &key]).trim(), "1");
            cluster.nodes[0].command(&["CLUSTER", "KEYSLOT", &key])
        })
        .collect();
    assert_eq!(slots.len(), 10);
}

/// A call of several keys sent to node 0 with keys of the other nodes
/// among them (as when their slots moved since the store last read the
/// owners): node 0 decides its own and refuses the others before writing
/// anything of them, and each of those is checked on its own node, once.
#[test]
fn keys_a_node_does_not_serve_are_checked_on_their_own_node_once() {
    limiter_tests::with_own_recorder(|snapshotter| async move {
        not_served(&snapshotter).await;
    });
}

async fn not_served(snapshotter: &Snapshotter) {
    let cluster = RedisCluster::start();
    let store = cluster.store().await;
    let policy = default_log();
    let mut keys = keys_on(&cluster, 0, 2);
    keys.extend(keys_on(&cluster, 1, 2));
    keys.extend(keys_on(&cluster, 2, 1));
    let keys: Vec<String> = keys.iter().map(|key| format!("rate_limit:{key}")).collect();
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    // The slots' owners known.
    assert!(
        store
            .check(&Key::from("warm"), &policy, 1)
            .await
            .unwrap()
            .allowed()
    );
    batch_sizes(snapshotter);

    for remaining in [9, 8] {
        let decisions = store.check_keys(&names, &policy, 1).await.unwrap();
        let left: Vec<u64> = decisions.iter().map(|d| d.remaining()).collect();
        assert_eq!(left, [remaining; 5]);
        // The call to node 0, then one call for each key it refused.
        assert_eq!(batch_sizes(snapshotter), [5.0, 1.0, 1.0, 1.0]);
    }
    for (key, node) in keys.iter().zip([0, 0, 1, 1, 2]) {
        let entries = cluster.nodes[node].command(&["ZCARD", key]);
        // Two entries and the member marking the newest.
        assert_eq!(entries.trim(), "3", "{key}");
    }
}

/// A slot migrating: MIGRATING on its owner, one key of it moved to the
/// importing node. A call of several keys to the owner refuses the moved
/// key before writing anything of it, and that key is checked on the node
/// it moved to, on the log it carried: nothing counted twice, nothing lost.
#[tokio::test]
async fn a_key_migrated_away_is_checked_where_it_went_on_the_log_it_carried() {
    let cluster = RedisCluster::start();
    let store = cluster.store().await;
    let policy = default_log();
    let keys: Vec<String> = (keys_on(&cluster, 0, 3).iter())
        .map(|key| format!("rate_limit:{key}"))
        .collect();
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let remaining = |decisions: Vec<limiter_core::Decision>| -> Vec<u64> {
        decisions.iter().map(|d| d.remaining()).collect()
    };
    let first = store.check_keys(&names, &policy, 1).await.unwrap();
    assert_eq!(remaining(first), [9, 9, 9]);

    let nodes = &cluster.nodes;
    let moved = &keys[1];
    let slot = nodes[0].command(&["CLUSTER", "KEYSLOT", moved]);
    let slot = slot.trim();
    let (source, target) = (nodes[0].id(), nodes[1].id());
    nodes[1].command(&["CLUSTER", "SETSLOT", slot, "IMPORTING", &source]);
    nodes[0].command(&["CLUSTER", "SETSLOT", slot, "MIGRATING", &target]);
    let port = nodes[1].port().to_string();
    let migrated = nodes[0].command(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        moved,
    ]);
    assert!(migrated.contains("OK"), "MIGRATE answered {migrated:?}");

    let second = store.check_keys(&names, &policy, 1).await.unwrap();
    assert_eq!(remaining(second), [8, 8, 8]);
    // The source holds no key of that name: it sends a read of it on.
    let on_source = nodes[0].command(&["EXISTS", moved]);
    assert!(on_source.starts_with("ASK "), "{on_source}");
    for node in nodes {
        node.command(&["CLUSTER", "SETSLOT", slot, "NODE", &target]);
    }
    // Two entries and the member marking the newest, on the new owner.
    assert_eq!(nodes[1].command(&["ZCARD", moved]).trim(), "3");
}
