//! Redis Cluster: keys spread over all masters, and a slot migrated under
//! load (MIGRATING / IMPORTING, MIGRATE, then the new owner) keeps every
//! decision exact.

use std::collections::BTreeSet;
use std::time::Duration;

use limiter_core::{Limiter, Policy, Rule};
use limiter_tests::{RedisCluster, SteadyLoad};

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

    let load = SteadyLoad::start(store, key, &policy, 8);
    // Let some requests land on the source first.
    load.checked(50).await;
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
    load.checked(400).await;
    let outcome = load.stop().await;
    for task in outcome.tasks {
        assert_eq!(task, Ok(()), "a check failed during the migration");
    }

    assert!(
        outcome.checks > LIMIT as usize + 100,
        "the load outran the limit"
    );
    assert_eq!(outcome.allowed, LIMIT as usize);
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
