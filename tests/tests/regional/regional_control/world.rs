//! Three regions on one machine: a `redis-server` each, a latency proxy on
//! every link from one region to another (30, 55 and 80 ms each way), a
//! regional store per region and a second one in south, each following its
//! region's blocks.

use std::time::{Duration, Instant};

use limiter_core::{Clock, SharedControl, SystemClock};
use limiter_regional::{RegionalConfig, RegionalStore};
use limiter_tests::RedisServer;
use limiter_tests::control::ControlCalls;
use limiter_tests::regions::{NAMES, Network, ONE_AT_A_TIME, staggered};

pub(crate) const NORTH: usize = 0;
const MIDDLE: usize = 1;
pub(crate) const SOUTH: usize = 2;
pub(crate) const MINUTE: Duration = Duration::from_secs(60);
/// Generous for a loaded test machine: the slowest link's round trip is
/// 160 ms.
const PEER_DEADLINE: Duration = Duration::from_secs(2);
/// How long a change relayed in the background may take to show in every
/// region: the slowest round trip (160 ms) for the relay, and as much
/// again for the block it earns (its write, its notice), with room for a
/// loaded machine.
pub(crate) const RELAY_BOUND: Duration = Duration::from_secs(2);

/// When a change was made, on the test's clock and on the one the stores
/// measure a block's time left by ([`SystemClock`]). The two run at rates
/// that differ by the counter's calibration, which a loaded machine makes
/// worse: over the seconds of a hang, by more than the store's
/// millisecond. A block's time left is compared on the stores' own clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    pub(crate) at: Instant,
    store_us: u64,
}

impl Started {
    pub(crate) fn now() -> Self {
        Self {
            at: Instant::now(),
            store_us: SystemClock.now_micros(),
        }
    }

    /// The time since, on the stores' clock.
    fn on_the_stores_clock(&self) -> Duration {
        Duration::from_micros(SystemClock.now_micros().saturating_sub(self.store_us))
    }
}

pub(crate) struct World {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    network: Network,
    /// North, middle, south, then a second instance in south.
    pub(crate) stores: Vec<RegionalStore>,
}

impl World {
    pub(crate) async fn start() -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let network = Network::start(staggered).await;
        let config = RegionalConfig::new()
            .peer_deadline(PEER_DEADLINE)
            .local_deadline(Duration::from_secs(5))
            .connection_timeout(Duration::from_secs(2));
        let stores = [NORTH, MIDDLE, SOUTH, SOUTH]
            .map(|here| network.store(here, &config, None))
            .into();
        let world = Self {
            _turn: turn,
            network,
            stores,
        };
        world.follow_blocks().await;
        world
    }

    /// Each instance follows its region's blocks, as a layer's does from
    /// its start: asked for its list, it subscribes to its region's notices.
    async fn follow_blocks(&self) {
        for store in &self.stores {
            store.tables();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (region, name) in NAMES.iter().enumerate() {
            let server = self.network.server(region);
            let instances = if region == SOUTH { 2 } else { 1 };
            while subscribers(server) < instances {
                assert!(Instant::now() < deadline, "{name} not subscribed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Cuts every link to and from `region`.
    pub(crate) fn partition(&self, region: usize) {
        self.network.partition(region);
    }

    pub(crate) fn heal(&self) {
        self.network.heal();
    }

    /// Hangs `region`'s Redis (SIGSTOP): what is sent to it waits, and
    /// runs once it [resumes](Self::resume).
    pub(crate) fn hang(&self, region: usize) {
        self.network.server(region).signal("STOP");
    }

    pub(crate) fn resume(&self, region: usize) {
        self.network.server(region).signal("CONT");
    }

    /// What each instance answers for `key`'s block now: whether it is
    /// blocked for at most `duration`, at least `duration` less the time
    /// since `since` (and the store's millisecond).
    pub(crate) fn blocked(&self, key: &str, duration: Duration, since: Started) -> Vec<bool> {
        let least = duration - since.on_the_stores_clock() - Duration::from_millis(1);
        let within = |left: Duration| left >= least && left <= duration;
        self.stores
            .iter()
            .map(|store| store.blocked(key).is_some_and(within))
            .collect()
    }

    /// Each instance's time left of `key`'s block, for a failure's message.
    pub(crate) fn lefts(&self, key: &str) -> Vec<Option<Duration>> {
        self.stores.iter().map(|store| store.blocked(key)).collect()
    }

    pub(crate) fn unblocked(&self, key: &str) -> Vec<bool> {
        (self.stores.iter())
            .map(|store| store.blocked(key).is_none())
            .collect()
    }
}

/// Subscribers to the notices on `server`.
fn subscribers(server: &RedisServer) -> u64 {
    let reply = server.command(&["PUBSUB", "NUMSUB", "limiter:resets"]);
    reply
        .lines()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
