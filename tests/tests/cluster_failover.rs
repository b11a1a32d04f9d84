//! A Redis Cluster losing a master: every call of the store keeps its own
//! deadline, guarded or not.

use std::time::{Duration, Instant};

use limiter_core::{Policy, RedisConfig, RedisStore, Rule, Store};
use limiter_tests::RedisCluster;

const DEADLINE: Duration = Duration::from_millis(50);
/// "Never hangs", not a speed: twice the deadline leaves room for a loaded
/// 2-core machine, and is far below what following CLUSTERDOWN and MOVED
/// answers for their own sake took (16 tries, 160 ms and more).
const BOUND: Duration = Duration::from_millis(2 * 50);

fn roomy() -> Policy {
    Policy::sliding_log([Rule::new(1_000_000, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// Keys owned by each master, in node order.
fn keys_per_node(cluster: &RedisCluster, per_node: usize) -> Vec<Vec<String>> {
    let mut keys = vec![Vec::new(); cluster.nodes.len()];
    for user in 0.. {
        let key = format!("user{user}");
        let owner = cluster.owner_of(&key);
        if keys[owner].len() < per_node {
            keys[owner].push(key);
        }
        if keys.iter().all(|k| k.len() == per_node) {
            return keys;
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_keeps_its_deadline_while_a_master_is_dead() {
    let mut cluster = RedisCluster::start();
    let urls = cluster.urls();
    let config = RedisConfig::new().response_timeout(DEADLINE);
    let store = RedisStore::connect_cluster(urls.iter().map(String::as_str), config)
        .await
        .unwrap();
    let keys = keys_per_node(&cluster, 5);
    for key in keys.iter().flatten() {
        store.check(key, &roomy(), 1).await.unwrap();
    }

    cluster.nodes[0].kill();
    // First the dead master's keys fail while the others' are decided; once
    // the survivors mark it failed, the cluster is down (it needs every slot
    // covered) and every key answers CLUSTERDOWN.
    let mut longest = Duration::ZERO;
    let mut failures = 0;
    let started = Instant::now();
    let mut down = None;
    while down.is_none_or(|since: Instant| since.elapsed() < Duration::from_secs(1)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the cluster never reported the failure"
        );
        for key in keys.iter().flatten() {
            let call = Instant::now();
            let outcome = store.check(key, &roomy(), 1).await;
            let took = call.elapsed();
            longest = longest.max(took);
            assert!(took < BOUND, "a call took {took:?} ({outcome:?})");
            failures += usize::from(outcome.is_err());
        }
        if down.is_none()
            && cluster.nodes[1]
                .command(&["CLUSTER", "INFO"])
                .contains("cluster_state:fail")
        {
            down = Some(Instant::now());
        }
    }
    println!("{failures} failed calls, the longest took {longest:?}");
    let after = store.check(&keys[1][0], &roomy(), 1).await;
    assert!(
        after.is_err(),
        "the cluster is down for every key: {after:?}"
    );
}
