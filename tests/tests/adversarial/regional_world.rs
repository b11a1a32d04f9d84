//! Three regions on one machine for the regional attacks: a `redis-server`
//! each, every link between two regions delayed by a proxy that can also
//! cut it, and a `RegionalStore` per region deciding on its own server.
//! One quota of 30 a second shared by the three, in windows aligned to
//! whole seconds of the servers' clock (this machine's).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use limiter_core::{Policy, Rule};
use limiter_regional::{RegionStats, RegionalConfig, RegionalStore};
use limiter_tests::regions::warm_up;

pub(crate) use limiter_tests::regions::{NAMES, Network, ONE_AT_A_TIME, REGIONS};
pub(crate) const QUOTA: u64 = 30;
pub(crate) const WINDOW_US: u64 = 1_000_000;

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

pub(crate) struct World {
    pub(crate) network: Network,
    pub(crate) stores: Vec<RegionalStore>,
}

impl World {
    pub(crate) async fn start(one_way: Duration, config: RegionalConfig) -> Self {
        let network = Network::start(|_, _| one_way).await;
        let stores: Vec<RegionalStore> = (0..REGIONS)
            .map(|here| network.store(here, &config, None))
            .collect();
        warm_up(&stores).await;
        Self { network, stores }
    }

    pub(crate) fn stats(&self) -> Vec<RegionStats> {
        self.stores.iter().map(RegionalStore::stats).collect()
    }
}
