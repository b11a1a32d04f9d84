//! Three regions on one machine for the regional attacks: a `redis-server`
//! each, every link between two regions delayed by a proxy that can also
//! cut it, and a `RegionalStore` per region deciding on its own server.
//! One quota of 30 a second shared by the three, in windows aligned to
//! whole seconds of the servers' clock (this machine's).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use limiter_core::{Policy, Rule};
use limiter_regional::{Region, RegionStats, RegionalConfig, RegionalStore};
use limiter_tests::RedisServer;
use limiter_tests::proxy::LatencyProxy;

pub(crate) const NAMES: [&str; 3] = ["north", "middle", "south"];
pub(crate) const REGIONS: usize = NAMES.len();
pub(crate) const QUOTA: u64 = 30;
pub(crate) const WINDOW_US: u64 = 1_000_000;

/// One world at a time: three Redis servers and six proxies under load are
/// all a 2-core machine can run. Other timed tests of regions take it too.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Deadlines generous for a loaded test machine, so no check fails and no
/// region's breaker opens: only the cross-region traffic is late.
pub(crate) fn config() -> RegionalConfig {
    RegionalConfig::new()
        .local_deadline(Duration::from_secs(5))
        .peer_deadline(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(2))
}

pub(crate) fn policy() -> Policy {
    Policy::fixed_window(Rule::new(QUOTA, Duration::from_micros(WINDOW_US)).unwrap())
}

/// The wall clock, the servers' clock (same machine), in µs.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A Redis server per region and a proxy on every link between two.
pub(crate) struct Network {
    servers: Vec<RedisServer>,
    /// `links[(from, to)]`: how `from` reaches `to`'s Redis.
    links: BTreeMap<(usize, usize), LatencyProxy>,
}

impl Network {
    pub(crate) async fn start(one_way: Duration) -> Self {
        let servers: Vec<RedisServer> = (0..REGIONS).map(|_| RedisServer::start()).collect();
        let mut links = BTreeMap::new();
        for from in 0..REGIONS {
            for to in (0..REGIONS).filter(|&to| to != from) {
                let target = ([127, 0, 0, 1], servers[to].port()).into();
                links.insert((from, to), LatencyProxy::start(target, one_way).await);
            }
        }
        Self { servers, links }
    }

    /// Region `region`'s own Redis.
    pub(crate) fn local_url(&self, region: usize) -> String {
        self.servers[region].url()
    }

    /// How region `from` reaches region `to`'s Redis.
    pub(crate) fn link_url(&self, from: usize, to: usize) -> String {
        self.links[&(from, to)].url()
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
}

pub(crate) struct World {
    pub(crate) network: Network,
    pub(crate) stores: Vec<RegionalStore>,
}

impl World {
    pub(crate) async fn start(one_way: Duration, config: RegionalConfig) -> Self {
        let network = Network::start(one_way).await;
        let stores: Vec<RegionalStore> = (0..REGIONS)
            .map(|here| {
                let local = Region::open(NAMES[here], &network.local_url(here)).unwrap();
                let peers = (0..REGIONS)
                    .filter(|&there| there != here)
                    .map(|there| Region::open(NAMES[there], &network.link_url(here, there)));
                let peers: Vec<Region> = peers.map(Result::unwrap).collect();
                RegionalStore::with_config(local, peers, config.clone()).unwrap()
            })
            .collect();
        // Connected to every region and scripts loaded: a quota of one,
        // used at once, sends for the others' counts.
        let warm_up = Policy::fixed_window(Rule::new(1, Duration::from_secs(1)).unwrap());
        for store in &stores {
            for _ in 0..2 {
                store
                    .check_at("warm-up", &warm_up, 1, 1_000_000)
                    .await
                    .unwrap();
            }
            store.idle().await;
        }
        Self { network, stores }
    }

    pub(crate) fn stats(&self) -> Vec<RegionStats> {
        self.stores.iter().map(RegionalStore::stats).collect()
    }
}
