//! Three regions on one machine: a `redis-server` each, a regional store
//! each deciding on its own server, and a latency proxy on every link from
//! one region to another (30, 55 and 80 ms each way).
//!
//! Traffic runs in rounds at times the test chooses (a manual clock): a round's
//! requests go out at once, then the test waits until every ask they set
//! off has ended. So "what arrives during an ask" is one round, and each
//! window's admissions can be counted exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use limiter_core::{ManualClock, Policy, Rule};
use limiter_regional::{RegionStats, RegionalConfig, RegionalStore};
use limiter_tests::RedisCluster;
use limiter_tests::at::At;
use limiter_tests::regions::{Network, ONE_AT_A_TIME, staggered, warm_up};
use tokio::task::JoinSet;

pub(crate) use limiter_tests::regions::REGIONS;
pub(crate) const QUOTA: u64 = 30;
pub(crate) const WINDOW: Duration = Duration::from_secs(1);
/// Rounds per window: the window's time is split evenly among them.
pub(crate) const ROUNDS: u64 = 20;

/// The shortest cross-region round trip.
pub(crate) const SHORTEST_ROUND_TRIP: Duration = Duration::from_millis(60);

pub(crate) struct World {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    network: Network,
    _cluster: Option<RedisCluster>,
    /// Each region's store, on one clock the rounds move.
    pub(crate) stores: Vec<At<RegionalStore>>,
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
        let network = Network::start(staggered).await;
        // Now, until a round moves it.
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let clock = ManualClock::new(since_epoch);
        let config = config.manual_clock(clock.clone());
        let stores: Vec<RegionalStore> = (0..REGIONS)
            .map(|here| network.store(here, &config, cluster.as_ref()))
            .collect();
        warm_up(&stores).await;
        let stores = (stores.into_iter())
            .map(|store| At {
                store,
                clock: clock.clone(),
            })
            .collect();
        Self {
            _turn: turn,
            network,
            _cluster: cluster,
            stores,
        }
    }

    /// Cuts every link to and from `region`.
    pub(crate) fn partition(&self, region: usize) {
        self.network.partition(region);
    }

    /// Restores every link.
    pub(crate) fn heal(&self) {
        self.network.heal();
    }

    pub(crate) fn stats(&self) -> Vec<RegionStats> {
        self.stores.iter().map(|store| store.stats()).collect()
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

    /// Every decision made in its own region: the checks' p99 below the
    /// shortest round trip to another.
    pub(crate) fn assert_local(&self) {
        assert!(
            self.p99() < SHORTEST_ROUND_TRIP,
            "local decisions waited for another region: p99 {:?}",
            self.p99()
        );
    }

    /// The 99th percentile of the checks' durations.
    pub(crate) fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[(sorted.len() * 99).div_ceil(100) - 1]
    }
}
