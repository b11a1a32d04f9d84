//! Three regions on one machine: a `redis-server` each, a regional store
//! each deciding on its own server, and a latency proxy on every link from
//! one region to another (30, 55 and 80 ms each way).
//!
//! Traffic runs in rounds at times the test chooses (`check_at`): a round's
//! requests go out at once, then the test waits until every ask they set
//! off has ended. So "what arrives during an ask" is one round, and each
//! window's admissions can be counted exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use limiter_core::{Policy, Rule};
use limiter_regional::{Region, RegionStats, RegionalConfig, RegionalStore};
use limiter_tests::proxy::LatencyProxy;
use limiter_tests::{RedisCluster, RedisServer};
use tokio::task::JoinSet;

pub(crate) const NAMES: [&str; 3] = ["north", "middle", "south"];
pub(crate) const REGIONS: usize = NAMES.len();
pub(crate) const QUOTA: u64 = 30;
pub(crate) const WINDOW: Duration = Duration::from_secs(1);
/// Rounds per window: the window's time is split evenly among them.
pub(crate) const ROUNDS: u64 = 20;

/// The one-way latency between two regions.
pub(crate) fn one_way(a: usize, b: usize) -> Duration {
    match (a.min(b), a.max(b)) {
        (0, 1) => Duration::from_millis(30),
        (1, 2) => Duration::from_millis(55),
        _ => Duration::from_millis(80),
    }
}

/// The shortest cross-region round trip.
pub(crate) const SHORTEST_ROUND_TRIP: Duration = Duration::from_millis(60);

use crate::ONE_AT_A_TIME;

pub(crate) struct World {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    /// Kept alive for the stores.
    _servers: Vec<RedisServer>,
    _cluster: Option<RedisCluster>,
    /// `links[(from, to)]`: how `from`'s store reaches `to`'s Redis.
    links: BTreeMap<(usize, usize), LatencyProxy>,
    pub(crate) stores: Vec<RegionalStore>,
}

impl World {
    pub(crate) async fn start(config: RegionalConfig) -> Self {
        Self::build(config, None).await
    }

    /// North's Redis is a three-node Redis Cluster, reached directly (its
    /// nodes redirect clients to their own addresses, past any proxy).
    pub(crate) async fn start_with_cluster(config: RegionalConfig) -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let cluster = RedisCluster::start();
        drop(turn);
        Self::build(config, Some(cluster)).await
    }

    async fn build(config: RegionalConfig, cluster: Option<RedisCluster>) -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let servers: Vec<RedisServer> = (0..REGIONS).map(|_| RedisServer::start()).collect();
        let mut links = BTreeMap::new();
        for from in 0..REGIONS {
            for to in (0..REGIONS).filter(|&to| to != from) {
                let target = ([127, 0, 0, 1], servers[to].port()).into();
                links.insert(
                    (from, to),
                    LatencyProxy::start(target, one_way(from, to)).await,
                );
            }
        }
        let region = |region: usize, url: &str| match (&cluster, region) {
            (Some(cluster), 0) => {
                let seeds = cluster.urls();
                Region::open_cluster(NAMES[0], seeds.iter().map(String::as_str)).unwrap()
            }
            _ => Region::open(NAMES[region], url).unwrap(),
        };
        let stores: Vec<RegionalStore> = (0..REGIONS)
            .map(|here| {
                let local = region(here, &servers[here].url());
                let peers = (0..REGIONS)
                    .filter(|&there| there != here)
                    .map(|there| region(there, &links[&(here, there)].url()));
                RegionalStore::with_config(local, peers, config.clone()).unwrap()
            })
            .collect();
        // Connected to every region and scripts loaded, so latencies are
        // the decisions' own: a quota of one, spent at once, asks.
        let warm_up = Policy::fixed_window(Rule::new(1, WINDOW).unwrap());
        for store in &stores {
            for _ in 0..2 {
                store
                    .check_at("warm-up", &warm_up, 1, 1_000_000)
                    .await
                    .unwrap();
            }
            store.idle().await;
        }
        Self {
            _turn: turn,
            _servers: servers,
            _cluster: cluster,
            links,
            stores,
        }
    }

    /// Cuts every link to and from `region`.
    pub(crate) fn partition(&self, region: usize) {
        for (&(from, to), link) in &self.links {
            if from == region || to == region {
                link.partition();
            }
        }
    }

    /// Restores every link.
    pub(crate) fn heal(&self) {
        for link in self.links.values() {
            link.heal();
        }
    }

    pub(crate) fn stats(&self) -> Vec<RegionStats> {
        self.stores.iter().map(RegionalStore::stats).collect()
    }

    pub(crate) async fn idle(&self) {
        for store in &self.stores {
            store.idle().await;
        }
    }
}

/// What one window saw, per region.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub(crate) admitted: [u64; REGIONS],
    pub(crate) denied: [u64; REGIONS],
}

impl Tally {
    pub(crate) fn admitted(&self) -> u64 {
        self.admitted.iter().sum()
    }

    pub(crate) fn denied(&self) -> u64 {
        self.denied.iter().sum()
    }

    /// A window with a denial admitted the whole quota: no region was left
    /// holding a share another region's demand needed.
    pub(crate) fn assert_no_false_denial(&self, window: u64) {
        assert!(
            self.denied() == 0 || self.admitted() >= QUOTA,
            "window {window}: denied before the quota was used: {self:?}"
        );
    }
}

/// Traffic on one key, in rounds.
pub(crate) struct Traffic<'a> {
    world: &'a World,
    policy: Policy,
    key: String,
    /// The first window's start (µs), a multiple of the window.
    base: u64,
    pub(crate) windows: BTreeMap<u64, Tally>,
    /// Every check's duration, as the caller waited for it.
    pub(crate) latencies: Vec<Duration>,
}

impl<'a> Traffic<'a> {
    pub(crate) fn new(world: &'a World, policy: Policy, key: &str) -> Self {
        let window = WINDOW.as_micros() as u64;
        Self {
            world,
            policy,
            key: key.to_owned(),
            base: 1_700_000_000_000_000 / window * window,
            windows: BTreeMap::new(),
            latencies: Vec::new(),
        }
    }

    pub(crate) fn fixed_window() -> Policy {
        Policy::fixed_window(Rule::new(QUOTA, WINDOW).unwrap())
    }

    pub(crate) fn sliding_window() -> Policy {
        Policy::sliding_window(Rule::new(QUOTA, WINDOW).unwrap())
    }

    /// Round `round` (0..ROUNDS) of window `window`: `requests[r]` checks
    /// sent at once to region `r`; returns when every ask they set off
    /// has ended.
    pub(crate) async fn round(&mut self, window: u64, round: u64, requests: [u64; REGIONS]) {
        let w = WINDOW.as_micros() as u64;
        let at = self.base + window * w + round * w / ROUNDS;
        let mut checks = JoinSet::new();
        for (region, &count) in requests.iter().enumerate() {
            for _ in 0..count {
                let store = self.world.stores[region].clone();
                let (key, policy) = (self.key.clone(), self.policy.clone());
                checks.spawn(async move {
                    let started = Instant::now();
                    let decision = store.check_at(&key, &policy, 1, at).await;
                    (region, decision, started.elapsed())
                });
            }
        }
        let tally = self.windows.entry(window).or_default();
        while let Some(done) = checks.join_next().await {
            let (region, decision, took) = done.unwrap();
            let decision = decision.unwrap_or_else(|e| panic!("region {region}: {e}"));
            if decision.allowed() {
                tally.admitted[region] += 1;
            } else {
                tally.denied[region] += 1;
            }
            self.latencies.push(took);
        }
        self.world.idle().await;
    }

    /// A whole window of rounds, `requests(round)` per region.
    pub(crate) async fn window(&mut self, window: u64, requests: impl Fn(u64) -> [u64; REGIONS]) {
        for round in 0..ROUNDS {
            self.round(window, round, requests(round)).await;
        }
    }

    /// Prints each window's tally (shown when a test fails).
    pub(crate) fn print(&self) {
        for (window, tally) in &self.windows {
            eprintln!("{}: window {window}: {tally:?}", self.key);
        }
        eprintln!("{}: p99 {:?}", self.key, self.p99());
    }

    /// The 99th percentile of the checks' durations.
    pub(crate) fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[(sorted.len() * 99).div_ceil(100) - 1]
    }
}
