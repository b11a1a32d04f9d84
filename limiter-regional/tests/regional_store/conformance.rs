//! The regional store runs the store conformance suite as any store crate
//! would: `limiter-conformance` as a dev-dependency, a harness, and servers
//! of its own that the shared test harness (`limiter-tests`) starts.

use std::time::Duration;

use limiter_conformance::{self as conformance, Harness, Support};
use limiter_core::{Algorithm, ManualClock};
use limiter_regional::{Region, RegionalConfig, RegionalStore};
use limiter_tests::RedisServer;

/// A deadline generous enough for a loaded test machine.
const DEADLINE: Duration = Duration::from_secs(5);

/// `redis://` at a port nothing listens on.
fn unused_url() -> String {
    format!("redis://127.0.0.1:{}/", RedisServer::unused_port())
}

/// A regional store of one region, "north", on a `redis-server` of its
/// own: its lease is the whole quota, so its decisions, peeks, resets and
/// refunds are a single region's, and the suite's traces apply. (How
/// regions share a quota is tested in `leases.rs` and the adversarial
/// suite: there a region's answers depend on the others' demand.)
///
/// The regional store runs the sliding window counter as defined, the
/// fixed window with windows aligned to multiples of the window (every
/// region must agree on a request's window) rather than from a key's
/// first request, so the model's traces do not apply to it; it refuses
/// the other algorithms. It keeps no concurrency permits. Its penalties
/// count in both regions; the suite reads north's answers.
struct Regional {
    north: RedisServer,
}

impl Harness for Regional {
    type Store = RegionalStore;

    /// With no other region, no ask nor relay is ever under way: each call
    /// is answered whole.
    async fn store(&self, clock: Option<ManualClock>) -> RegionalStore {
        let config = RegionalConfig::new()
            .local_deadline(DEADLINE)
            .peer_deadline(Duration::from_secs(1))
            .connection_timeout(Duration::from_secs(2));
        let config = match clock {
            Some(clock) => config.manual_clock(clock),
            None => config,
        };
        let north = Region::open("north", &self.north.url()).unwrap();
        RegionalStore::with_config(north, [], config).unwrap()
    }

    /// North on a port nothing listens on (the default deadlines).
    async fn unreachable(&self, clock: Option<ManualClock>) -> Option<RegionalStore> {
        let config = match clock {
            Some(clock) => RegionalConfig::new().manual_clock(clock),
            None => RegionalConfig::new(),
        };
        let north = Region::open("north", &unused_url()).unwrap();
        Some(RegionalStore::with_config(north, [], config).unwrap())
    }

    fn support(&self, algorithm: Algorithm) -> Support {
        match algorithm {
            Algorithm::SlidingWindow => Support::Exact,
            Algorithm::FixedWindow => Support::LimitOnly,
            _ => Support::Refused,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regional_conforms() {
    let regional = Regional {
        north: RedisServer::start(),
    };
    conformance::run(&regional).await;
}
