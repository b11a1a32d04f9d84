//! A Redis Cluster of real processes.

use std::time::{Duration, Instant};

use limiter_redis::{RedisConfig, RedisStore};

use crate::RedisServer;

/// A Redis Cluster of three masters, each a `redis-server` (or
/// `LIMITER_TEST_SERVER`) process on a free port, with a replica each when asked; slots split evenly by the harness.
/// Stopped on drop.
#[derive(Debug)]
pub struct RedisCluster {
    /// The masters, in slot order: node 0 owns 0..=5460, 1 owns 5461..=10922, 2 the rest.
    pub nodes: Vec<RedisServer>,
    /// `replicas[i]` replicates `nodes[i]` (empty unless started with replicas).
    pub replicas: Vec<RedisServer>,
}

const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

impl RedisCluster {
    /// Starts three masters and waits until every node reports
    /// `cluster_state:ok` and knows the whole slot map.
    pub fn start() -> Self {
        Self::start_with(false, &[])
    }

    /// Starts three masters with a replica each, every node also given
    /// `extra` arguments (such as `--cluster-replica-no-failover yes`, so
    /// that only the test promotes a replica, or
    /// `--cluster-require-full-coverage no`, so that a shard without a
    /// master leaves the others serving).
    pub fn start_with_replicas(extra: &[&str]) -> Self {
        Self::start_with(true, extra)
    }

    fn start_with(replicas: bool, extra: &[&str]) -> Self {
        let start = || {
            let mut args = vec![
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
            ];
            args.extend_from_slice(extra);
            RedisServer::start_with(&args)
        };
        let nodes: Vec<RedisServer> = (0..3).map(|_| start()).collect();
        let replicas: Vec<RedisServer> =
            (0..if replicas { 3 } else { 0 }).map(|_| start()).collect();
        for (node, (first, last)) in nodes.iter().zip(RANGES) {
            node.command(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &first.to_string(),
                &last.to_string(),
            ]);
        }
        for node in nodes[1..].iter().chain(&replicas) {
            nodes[0].command(&["CLUSTER", "MEET", "127.0.0.1", &node.port().to_string()]);
        }
        let cluster = Self { nodes, replicas };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut replicating = vec![false; cluster.replicas.len()];
        loop {
            // A replica can follow its master once it knows of it.
            for (i, replica) in cluster.replicas.iter().enumerate() {
                if !replicating[i] {
                    let master = cluster.nodes[i].id();
                    replicating[i] = replica
                        .command(&["CLUSTER", "REPLICATE", &master])
                        .starts_with("OK");
                }
            }
            let every_node = cluster.nodes.len() + cluster.replicas.len();
            let ready = replicating.iter().all(|&r| r)
                && cluster.nodes.iter().chain(&cluster.replicas).all(|n| {
                    n.command(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
                        && n.command(&["CLUSTER", "SLOTS"])
                            .matches("127.0.0.1")
                            .count()
                            >= every_node
                })
                && cluster.replicas.iter().all(|r| {
                    r.command(&["INFO", "replication"])
                        .contains("master_link_status:up")
                });
            if ready {
                return cluster;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not form within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A cluster store through every node as a seed, with a deadline
    /// generous enough for a loaded test machine.
    pub async fn store(&self) -> RedisStore {
        let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
        self.store_with(config).await
    }

    /// A store connected to the cluster with `config`.
    pub async fn store_with(&self, config: RedisConfig) -> RedisStore {
        let urls = self.urls();
        RedisStore::connect_cluster(urls.iter().map(String::as_str), config)
            .await
            .expect("connect to the test cluster")
    }

    /// `redis://127.0.0.1:{port}/` of every master, the seeds for a client.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The shard (the index of its first master) that owns `key`'s slot.
    pub fn owner_of(&self, key: &str) -> usize {
        // Asked of the first node that answers (some may have been killed).
        let slot: u16 = self
            .nodes
            .iter()
            .chain(&self.replicas)
            .find_map(|n| n.command(&["CLUSTER", "KEYSLOT", key]).trim().parse().ok())
            .expect("a node answers with a slot number");
        RANGES
            .iter()
            .position(|&(first, last)| (first..=last).contains(&slot))
            .expect("every slot is in a range")
    }
}

impl RedisServer {
    /// The node's cluster id (`CLUSTER MYID`).
    pub fn id(&self) -> String {
        self.command(&["CLUSTER", "MYID"]).trim().to_owned()
    }
}
