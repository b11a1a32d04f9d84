//! Redis Cluster: keys spread over all masters, and a slot migrated under
//! load (MIGRATING / IMPORTING, MIGRATE, then the new owner) keeps every
//! decision exact.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use limiter_core::{Limiter, Policy, Rule, Store};
use limiter_tests::RedisCluster;

#[tokio::test]
async fn keys_of_many_users_spread_over_all_three_masters() {
    let cluster = RedisCluster::start();
    let limiter = Limiter::new(cluster.store().await);
    for user in 0..60 {
        let allowed = limiter
            .is_action_allowed(&format!("user{user}"), "reply", Duration::from_secs(60), 5)
            .await
            .unwrap();
        assert!(allowed);
    }
    let per_node: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.command(&["DBSIZE"]).trim().parse().unwrap())
        .collect();
    assert_eq!(per_node.iter().sum::<u64>(), 60);
    assert!(
        per_node.iter().all(|&keys| keys > 0),
        "keys per master: {per_node:?}"
    );
    let owners: BTreeSet<usize> = (0..60)
        .map(|u| cluster.owner_of(&format!("rate_limit:user{u}:reply")))
        .collect();
    assert_eq!(owners.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_migrated_under_load_keeps_every_decision_exact() {
    const LIMIT: u64 = 300;
    let cluster = RedisCluster::start();
    let store = cluster.store().await;
    let key = "migrating:laoqian";
    let policy =
        Policy::sliding_log([Rule::new(LIMIT, Duration::from_secs(600)).unwrap()]).unwrap();
    let source = cluster.owner_of(key);
    let target = (source + 1) % 3;
    let slot = cluster.nodes[0]
        .command(&["CLUSTER", "KEYSLOT", key])
        .trim()
        .to_owned();
    let id = |node: usize| {
        cluster.nodes[node]
            .command(&["CLUSTER", "MYID"])
            .trim()
            .to_owned()
    };
    let (source_id, target_id) = (id(source), id(target));

    let allowed = Arc::new(AtomicUsize::new(0));
    let checks = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (store, policy) = (store.clone(), policy.clone());
        let (allowed, checks, stop) = (allowed.clone(), checks.clone(), stop.clone());
        load.spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let decision = store.check(key, &policy, 1).await;
                checks.fetch_add(1, Ordering::SeqCst);
                match decision {
                    Ok(d) if d.allowed() => allowed.fetch_add(1, Ordering::SeqCst),
                    Ok(_) => 0,
                    Err(error) => {
                        stop.store(true, Ordering::SeqCst);
                        return Err(error.to_string());
                    }
                };
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(())
        });
    }
    // Waits for `count` more checks, failing (not hanging) if the load stops.
    let checked = |count: usize| {
        let (checks, stop) = (checks.clone(), stop.clone());
        async move {
            let target = checks.load(Ordering::SeqCst) + count;
            for _ in 0..6_000 {
                if checks.load(Ordering::SeqCst) >= target || stop.load(Ordering::SeqCst) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("the load made no progress for 30 s");
        }
    };
    // Let some requests land on the source first.
    checked(50).await;
    let nodes = &cluster.nodes;
    nodes[target].command(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id]);
    nodes[source].command(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let port = nodes[target].port().to_string();
    let migrated =
        nodes[source].command(&["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS", key]);
    assert!(migrated.contains("OK"), "MIGRATE answered {migrated:?}");
    // Requests now meet ASK on the source until the slot is handed over.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for node in nodes {
        node.command(&["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]);
    }
    // And MOVED afterwards, until every client knows the new owner.
    checked(400).await;
    stop.store(true, Ordering::SeqCst);
    for outcome in load.join_all().await {
        assert_eq!(outcome, Ok(()), "a check failed during the migration");
    }

    assert!(
        checks.load(Ordering::SeqCst) > LIMIT as usize + 100,
        "the load outran the limit"
    );
    assert_eq!(allowed.load(Ordering::SeqCst), LIMIT as usize);
    let on_target: u64 = nodes[target]
        .command(&["ZCARD", key])
        .trim()
        .parse()
        .unwrap();
    // The log's entries and the member that marks the newest one.
    assert_eq!(
        on_target,
        LIMIT + 1,
        "the key lives on the new owner, whole"
    );
}
