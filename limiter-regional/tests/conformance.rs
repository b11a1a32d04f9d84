//! The regional store runs the store conformance suite as any store crate
//! would: `limiter-conformance` as a dev-dependency, a harness, and servers
//! of its own that the shared test harness (`limiter-tests`) starts.

use std::time::Duration;

use limiter_conformance::{self as conformance, Harness, Support};
use limiter_core::{Algorithm, Decision, Error, Penalty, Policy};
use limiter_regional::{Region, RegionalConfig, RegionalStore, TierSize};
use limiter_tests::RedisServer;

/// A deadline generous enough for a loaded test machine.
const DEADLINE: Duration = Duration::from_secs(5);

/// `redis://` at a port nothing listens on.
fn unused_url() -> String {
    format!("redis://127.0.0.1:{}/", RedisServer::unused_port())
}

/// A regional store deciding in "north", one peer region ("south"), each
/// on a `redis-server` of its own; only north's checks run, so its
/// decisions are a single region's.
///
/// Its tiers lie at the quota: a region whose sync is pending is held to a
/// step past its count (denying early, by design, while other regions may
/// be counting unseen), so with the default tiers tasks racing at one
/// instant would be admitted fewer than the limit. With tiers at the
/// quota, one region's traffic syncs only once the quota is used, and
/// every check is exact. `check_at` waits until the syncs a check set off
/// have ended, as the next request of a region whose syncs keep up would.
///
/// The regional store runs the sliding window counter as defined, the
/// fixed window with windows aligned to multiples of the window (every
/// region must agree on a request's window) rather than from a key's
/// first request, so the model's traces do not apply to it; it refuses
/// the other algorithms. It keeps no concurrency permits. Its penalties
/// count in both regions; the suite reads north's answers.
struct Regional {
    north: RedisServer,
    south: RedisServer,
}

impl Harness for Regional {
    type Store = RegionalStore;

    async fn store(&self) -> RegionalStore {
        let config = RegionalConfig::new()
            .first_tier(TierSize::Percent(100))
            .step(TierSize::Percent(100))
            .local_deadline(DEADLINE)
            .peer_deadline(Duration::from_secs(1))
            .connection_timeout(Duration::from_secs(2));
        let north = Region::open("north", &self.north.url()).unwrap();
        let south = Region::open("south", &self.south.url()).unwrap();
        RegionalStore::with_config(north, [south], config).unwrap()
    }

    async fn check_at(
        &self,
        store: &RegionalStore,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Result<Decision, Error> {
        let decision = store.check_at(key, policy, cost, now_us).await;
        store.idle().await;
        decision
    }

    /// Counted in north, answered, and relayed to south; waits until the
    /// relay has ended, so south's count follows the suite's times in
    /// order (as it does when denials come slower than a round trip).
    async fn penalize_at(
        &self,
        store: &RegionalStore,
        key: &str,
        penalty: &Penalty,
        now_us: u64,
    ) -> Option<Result<Option<Duration>, Error>> {
        let answer = store.penalize_at(key, penalty, now_us).await;
        store.relays_idle().await;
        Some(answer)
    }

    /// North and south both on ports nothing listens on (the default
    /// deadlines).
    async fn unreachable(&self) -> Option<RegionalStore> {
        let north = Region::open("north", &unused_url()).unwrap();
        let south = Region::open("south", &unused_url()).unwrap();
        Some(RegionalStore::new(north, [south]).unwrap())
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
        south: RedisServer::start(),
    };
    conformance::run(&regional).await;
}
