//! Three regions on one machine: a `redis-server` each and a latency proxy
//! on every link from one region to another, which can also cut it; and
//! regional stores over them, as the regional tests run them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use limiter_core::{Key, Policy, Rule, Store};
use limiter_regional::{Region, RegionalConfig, RegionalStore};

use crate::proxy::LatencyProxy;
use crate::{RedisCluster, RedisServer};

/// The regions, by index: north 0, middle 1, south 2.
pub const NAMES: [&str; 3] = ["north", "middle", "south"];
/// How many regions there are.
pub const REGIONS: usize = NAMES.len();

/// One set of regions at a time in a test binary: three to six Redis
/// servers and six proxies load a 2-core machine enough to blur the
/// latencies measured.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Links of different lengths: 30 ms one way between north and middle, 55
/// between middle and south, 80 between north and south.
pub fn staggered(a: usize, b: usize) -> Duration {
    match (a.min(b), a.max(b)) {
        (0, 1) => Duration::from_millis(30),
        (1, 2) => Duration::from_millis(55),
        _ => Duration::from_millis(80),
    }
}

/// A Redis server per region and a proxy on every link between two.
#[derive(Debug)]
pub struct Network {
    servers: Vec<RedisServer>,
    /// `links[(from, to)]`: how `from` reaches `to`'s Redis.
    links: BTreeMap<(usize, usize), LatencyProxy>,
}

impl Network {
    /// The servers, and links as long as `one_way(from, to)` each way.
    pub async fn start(one_way: impl Fn(usize, usize) -> Duration) -> Self {
        let servers: Vec<RedisServer> = (0..REGIONS).map(|_| RedisServer::start()).collect();
        let mut links = BTreeMap::new();
        for from in 0..REGIONS {
            for to in (0..REGIONS).filter(|&to| to != from) {
                let target = ([127, 0, 0, 1], servers[to].port()).into();
                let proxy = LatencyProxy::start(target, one_way(from, to)).await;
                links.insert((from, to), proxy);
            }
        }
        Self { servers, links }
    }

    /// Region `region`'s own Redis.
    pub fn server(&self, region: usize) -> &RedisServer {
        &self.servers[region]
    }

    /// How region `from` reaches region `to`'s Redis.
    pub fn link_url(&self, from: usize, to: usize) -> String {
        self.links[&(from, to)].url()
    }

    /// A regional store in region `here` under `config`: its own Redis
    /// directly, the others through the links; north's a Cluster's, when
    /// given, reached directly (its nodes redirect clients to their own
    /// addresses, past any proxy).
    pub fn store(
        &self,
        here: usize,
        config: &RegionalConfig,
        north: Option<&RedisCluster>,
    ) -> RegionalStore {
        let region = |region: usize, url: String| match (north, region) {
            (Some(cluster), 0) => {
                let seeds = cluster.urls();
                Region::open_cluster(NAMES[0], seeds.iter().map(String::as_str)).unwrap()
            }
            _ => Region::open(NAMES[region], &url).unwrap(),
        };
        let local = region(here, self.servers[here].url());
        let peers = (0..REGIONS)
            .filter(|&there| there != here)
            .map(|there| region(there, self.link_url(here, there)));
        RegionalStore::with_config(local, peers, config.clone()).unwrap()
    }

    /// Cuts every link to and from `region`.
    pub fn partition(&self, region: usize) {
        for (&(from, to), link) in &self.links {
            if from == region || to == region {
                link.partition();
            }
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        for link in self.links.values() {
            link.heal();
        }
    }
}

/// Connects each store to every region and loads its scripts, so that
/// latencies measured next are the decisions' own: a quota of one, spent
/// at once, asks the other regions.
pub async fn warm_up(stores: &[RegionalStore]) {
    let warm_up = Policy::fixed_window(Rule::new(1, Duration::from_secs(1)).unwrap());
    let key = Key::from("warm-up");
    for store in stores {
        for _ in 0..2 {
            store.check(&key, &warm_up, 1).await.unwrap();
        }
        store.idle().await;
    }
}

/// This machine's clock, the servers' (same machine), in whole seconds.
pub fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Sleeps until `into` past the next whole second (the window of a quota
/// per second, by the servers' clock), and answers that second.
pub async fn next_second(into: Duration) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let past = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - past + into).await;
    unix_second()
}

/// Runs `attempt` on a fresh key (`k1`, then `k2`, then `k3`) from just
/// past the start of a second of the servers' clock, until one run fits
/// in its second, and answers that run's result: a run on a machine too
/// busy to fit tries again. Fails when three runs in a row did not fit.
pub async fn in_one_second<T>(mut attempt: impl AsyncFnMut(&'static str) -> T) -> T {
    for key in ["k1", "k2", "k3"] {
        let started = next_second(Duration::from_millis(5)).await;
        let run = attempt(key).await;
        if unix_second() == started {
            return run;
        }
    }
    panic!("three runs in a row did not fit in one second");
}
