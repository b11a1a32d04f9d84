//! A Redis Cluster losing a master: every call of the store keeps its own
//! deadline, guarded or not, and only the dead master's keys go to the
//! failure policy, until its replica takes over. A manual failover under
//! load keeps every decision exact.

use std::time::{Duration, Instant};

use limiter_core::{
    BreakerState, Capabilities, GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Store,
    Verdict,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisCluster, SteadyLoad};

const DEADLINE: Duration = Duration::from_millis(50);
/// "Never hangs", not a speed: twice the deadline leaves room for a loaded
/// machine, and is below what following CLUSTERDOWN answers for their own
/// sake took (16 tries with pauses between them: 128 ms and more).
const BOUND: Duration = DEADLINE.saturating_mul(2);

use crate::ONE_AT_A_TIME;

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
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut cluster = RedisCluster::start();
    let urls = cluster.urls();
    let config = RedisConfig::new().response_timeout(DEADLINE);
    let store = RedisStore::connect_cluster(urls.iter().map(String::as_str), config)
        .await
        .unwrap();
    let keys = keys_per_node(&cluster, 5);
    for key in keys.iter().flatten() {
        store.check(&Key::from(key), &roomy(), 1).await.unwrap();
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
            let outcome = store.check(&Key::from(key), &roomy(), 1).await;
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
    let after = store.check(&Key::from(&keys[1][0]), &roomy(), 1).await;
    assert!(
        after.is_err(),
        "the cluster is down for every key: {after:?}"
    );
}

/// Which stage decided each key's calls.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    store: usize,
    fallback: usize,
}

impl Tally {
    fn calls(&self) -> usize {
        self.store + self.fallback
    }
}

async fn check_all(guarded: &Guarded<RedisStore>, keys: &[Vec<String>], tallies: &mut [Tally]) {
    for (shard, keys) in keys.iter().enumerate() {
        for key in keys {
            match guarded
                .check_with(&Key::from(key), &roomy(), 1, OnStoreError::default())
                .await
                .unwrap()
            {
                Verdict::Store(_) => tallies[shard].store += 1,
                Verdict::Fallback(_) => tallies[shard].fallback += 1,
                other => panic!("{other:?}"),
            }
        }
    }
}

/// A deadline that a loaded machine keeps: the tests below count verdicts.
const GUARDED_DEADLINE: Duration = Duration::from_millis(500);

/// Three masters with a replica each, the replicas waiting for a test to
/// promote them and the cluster serving the slots it still covers; and a
/// store on it, guarded with [`GUARDED_DEADLINE`].
async fn guarded_cluster() -> (RedisCluster, Guarded<RedisStore>) {
    let cluster = RedisCluster::start_with_replicas(&[
        "--cluster-replica-no-failover",
        "yes",
        "--cluster-require-full-coverage",
        "no",
    ]);
    let urls = cluster.urls();
    let config = RedisConfig::new().response_timeout(GUARDED_DEADLINE);
    let store = RedisStore::connect_cluster(urls.iter().map(String::as_str), config)
        .await
        .unwrap();
    let guard = GuardConfig {
        deadline: GUARDED_DEADLINE,
        ..GuardConfig::default()
    };
    (cluster, Guarded::new(store, guard))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_costs_only_its_own_keys_until_its_replica_takes_over() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (mut cluster, guarded) = guarded_cluster().await;
    let keys = keys_per_node(&cluster, 5);
    // The store reads which node serves which slot in the background.
    let started = Instant::now();
    while keys
        .iter()
        .flatten()
        .any(|k| guarded.store().failure_domain(&Key::from(k)) == 0)
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "slots never read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for shard in &keys {
        let domain_of = |k| guarded.store().failure_domain(&Key::from(k));
        let domain = domain_of(&shard[0]);
        assert!(shard.iter().all(|k| domain_of(k) == domain));
    }
    let mut tallies = vec![Tally::default(); 3];
    check_all(&guarded, &keys, &mut tallies).await;
    assert_eq!(tallies.iter().map(|t| t.store).sum::<usize>(), 15);

    cluster.nodes[0].kill();
    let mut tallies = vec![Tally::default(); 3];
    let killed = Instant::now();
    // Past the node timeout (2 s): the others mark the master failed.
    while killed.elapsed() < Duration::from_secs(3) {
        check_all(&guarded, &keys, &mut tallies).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("master 0 dead: {tallies:?}");
    assert_eq!(tallies[0].store, 0);
    for healthy in &tallies[1..] {
        assert_eq!(healthy.store, healthy.calls(), "{tallies:?}");
    }
    assert_eq!(guarded.breaker_state_of(&keys[0][0]), BreakerState::Open);
    assert_eq!(guarded.breaker_state_of(&keys[1][0]), BreakerState::Closed);

    // Its replica takes over: its keys return to Redis.
    cluster.replicas[0].command(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
    let promoted = Instant::now();
    let mut tallies = vec![Tally::default(); 3];
    loop {
        let before = tallies[0].store;
        check_all(&guarded, &keys, &mut tallies).await;
        if tallies[0].store - before == keys[0].len() {
            break;
        }
        assert!(
            promoted.elapsed() < Duration::from_secs(10),
            "the dead master's keys did not return to Redis: {tallies:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "decided by the promoted replica {:?} after the takeover: {tallies:?}",
        promoted.elapsed()
    );
    for healthy in &tallies[1..] {
        assert_eq!(healthy.store, healthy.calls(), "{tallies:?}");
    }
    assert_eq!(guarded.breaker_state_of(&keys[0][0]), BreakerState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manual_failover_under_load_keeps_every_decision_exact() {
    let _alone = ONE_AT_A_TIME.lock().await;
    const LIMIT: u64 = 300;
    let cluster = RedisCluster::start_with_replicas(&[]);
    let store = cluster.store().await;
    let key = "failover:laoqian";
    let shard = cluster.owner_of(key);
    let policy =
        Policy::sliding_log([Rule::new(LIMIT, Duration::from_secs(600)).unwrap()]).unwrap();

    let load = SteadyLoad::start(store, key, &policy, 8);
    load.checked(50).await;
    // The replica catches up with its master, which pauses its clients,
    // then takes its slots; the old master becomes its replica.
    let replica = &cluster.replicas[shard];
    assert_eq!(replica.command(&["CLUSTER", "FAILOVER"]).trim(), "OK");
    let started = Instant::now();
    while replica.role() != "master" || cluster.nodes[shard].role() != "slave" {
        assert!(started.elapsed() < Duration::from_secs(30), "no failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    load.checked(400).await;
    let outcome = load.stop().await;
    for task in outcome.tasks {
        assert_eq!(task, Ok(()), "a check failed during the failover");
    }
    assert!(outcome.checks > LIMIT as usize + 100);
    assert_eq!(outcome.allowed, LIMIT as usize);
    let on_new_master: u64 = replica.command(&["ZCARD", key]).trim().parse().unwrap();
    // The log's entries and the member that marks the newest one.
    assert_eq!(on_new_master, LIMIT + 1);
}

/// Control writes go through the breaker of the node holding the control
/// state (`{limiter:resets}`), whatever key they name. With that node hung,
/// a key on another node is still decided by Redis, and blocks of that key
/// answer `Unconfirmed` within the deadline (then `Unavailable` at once),
/// opening the control node's breaker, never the key's node's; with the
/// key's own node hung instead, blocking it succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_writes_go_through_the_control_nodes_breaker() {
    use limiter_core::{BlockOrigin, CONTROL_STATE_KEY, Change, Error};

    let _alone = ONE_AT_A_TIME.lock().await;
    let (cluster, guarded) = guarded_cluster().await;
    let deadline = GUARDED_DEADLINE;
    let control = cluster.owner_of(CONTROL_STATE_KEY);
    let keys = keys_per_node(&cluster, 1);
    let other = (control + 1) % keys.len();
    let key = &keys[other][0];
    let started = Instant::now();
    while guarded.store().failure_domain(&Key::from(key))
        == guarded
            .store()
            .failure_domain(&Key::from(CONTROL_STATE_KEY))
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "slots never read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shared = guarded.as_shared_control().unwrap();
    let block = || Change::Block {
        key,
        duration: Duration::from_secs(60),
        origin: BlockOrigin::Operator,
    };
    shared.change(block()).await.unwrap();

    cluster.nodes[control].signal("STOP");
    for attempt in 0..5 {
        let called = Instant::now();
        // Sent and cut short by the deadline; once the breaker is open,
        // refused without a call.
        let blocked = shared.change(block()).await;
        assert!(
            matches!(blocked, Err(Error::Unconfirmed(_)))
                || attempt > 0 && matches!(blocked, Err(Error::Unavailable(_))),
            "attempt {attempt}: {blocked:?}"
        );
        // "Never hangs": one deadline, and a loaded machine's slack.
        assert!(called.elapsed() < deadline * 2, "{:?}", called.elapsed());
        let checked = guarded
            .check_with(&Key::from(key), &roomy(), 1, OnStoreError::default())
            .await
            .unwrap();
        // The first check after the first timeout may wait on the cluster
        // client, which recovers its connections after a timeout; every
        // later one is Redis's.
        if attempt > 0 {
            assert!(
                matches!(checked, Verdict::Store(_)),
                "attempt {attempt}: {checked:?}"
            );
        }
        assert_eq!(guarded.breaker_state_of(key), BreakerState::Closed);
    }
    assert_eq!(
        guarded.breaker_state_of(CONTROL_STATE_KEY),
        BreakerState::Open
    );
    assert_eq!(guarded.breaker_state_of(key), BreakerState::Closed);

    cluster.nodes[control].signal("CONT");
    cluster.nodes[other].signal("STOP");
    // Once the control node's breaker lets a probe through, the block
    // succeeds, though the key's own node is hung.
    let resumed = Instant::now();
    while shared.change(block()).await.is_err() {
        assert!(resumed.elapsed() < Duration::from_secs(20), "never blocked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        guarded.breaker_state_of(CONTROL_STATE_KEY),
        BreakerState::Closed
    );
    cluster.nodes[other].signal("CONT");
}
