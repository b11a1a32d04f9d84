//! Redis Sentinel of real processes: a primary, its replica, and Sentinels
//! watching them, tuned to fail over within a second or two.

use std::time::{Duration, Instant};

use crate::RedisServer;

/// A primary and a replica watched by Sentinels. Stopped on drop.
#[derive(Debug)]
pub struct RedisSentinel {
    /// The data nodes: `nodes[0]` starts as the primary, `nodes[1]` as its replica.
    pub nodes: Vec<RedisServer>,
    /// The Sentinels.
    pub sentinels: Vec<RedisServer>,
}

impl RedisSentinel {
    /// The name the Sentinels know the primary by.
    pub const SERVICE: &str = "mymaster";

    /// Starts the primary, the replica and `sentinels` Sentinels (a majority
    /// of them is the quorum), and waits until each Sentinel knows the replica
    /// and the replica is in sync.
    pub fn start(sentinels: usize) -> Self {
        let primary = RedisServer::start();
        let port = primary.port().to_string();
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
        // A primary is down after 500 ms without an answer; a failover that
        // stalls is given up (and may be tried again) after 2 s.
        let config = format!(
            "sentinel monitor {} 127.0.0.1 {port} {}\n\
             sentinel down-after-milliseconds {0} 500\n\
             sentinel failover-timeout {0} 2000\n",
            Self::SERVICE,
            sentinels / 2 + 1,
        );
        let sentinels = (0..sentinels)
            .map(|_| RedisServer::start_sentinel(&config))
            .collect();
        let deployment = Self {
            nodes: vec![primary, replica],
            sentinels,
        };
        let replica = format!("127.0.0.1:{}", deployment.nodes[1].port());
        deployment.wait_until("the Sentinels know the replica", |d| {
            d.nodes[1].role() == "slave"
                && d.nodes[1]
                    .command(&["INFO", "replication"])
                    .contains("master_link_status:up")
                && d.sentinels.iter().all(|s| {
                    s.command(&["SENTINEL", "REPLICAS", Self::SERVICE])
                        .contains(&replica)
                        && s.command(&["SENTINEL", "CKQUORUM", Self::SERVICE])
                            .starts_with("OK")
                })
        });
        deployment
    }

    /// `redis://127.0.0.1:{port}/` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The data node every Sentinel names as the primary, if they agree on one.
    pub fn named_primary(&self) -> Option<usize> {
        let named: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| {
                s.command(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", Self::SERVICE])
                    .lines()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let port = named.first()?.parse::<u16>().ok()?;
        if named.iter().any(|p| p.parse::<u16>().ok() != Some(port)) {
            return None;
        }
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// Polls `done` every 20 ms for up to 30 s; panics naming `what` after that.
    pub fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: not within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl RedisServer {
    /// `master` or `slave`, from `INFO replication` (empty when it does not answer).
    pub fn role(&self) -> String {
        self.command(&["INFO", "replication"])
            .lines()
            .find_map(|l| l.strip_prefix("role:"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// How often `command` ran, from `INFO commandstats` (zeros when never).
    pub fn command_calls(&self, command: &str) -> CommandCalls {
        let stats = self.command(&["INFO", "commandstats"]);
        let line = stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
            .unwrap_or_default();
        let field = |name: &str| {
            line.split(',')
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        CommandCalls {
            calls: field("calls"),
            rejected: field("rejected_calls"),
            failed: field("failed_calls"),
        }
    }
}

/// A command's counts in `INFO commandstats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandCalls {
    /// Runs, including the ones that failed while running.
    pub calls: u64,
    /// Refused before running (such as `READONLY` on a replica, `OOM`).
    pub rejected: u64,
    /// Failed while running (such as `NOSCRIPT`).
    pub failed: u64,
}

impl CommandCalls {
    /// The runs that succeeded.
    pub fn succeeded(&self) -> u64 {
        self.calls - self.failed
    }
}
