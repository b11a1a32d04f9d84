//! The Redis store (standalone, Cluster, Sentinel) and the regional store
//! run the store conformance suite (`limiter_core::conformance`), each on
//! servers of its own that the harness starts. The suite's times go
//! through the stores' `check_at` (the `test-util` feature), their own
//! through `Store::check` on the servers' clocks.
//!
//! Only this file names the stores: each harness below is the whole of
//! what a store needs to run the suite.

use std::time::Duration;

use limiter_core::conformance::{self, Harness, Support};
use limiter_core::{Algorithm, Decision, Error, Policy};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_regional::{Region, RegionalConfig, RegionalStore, TierSize};
use limiter_tests::{RedisCluster, RedisSentinel, RedisServer, TestRedis};

/// A deadline generous enough for a loaded test machine.
const DEADLINE: Duration = Duration::from_secs(5);

/// `redis://` at a port nothing listens on.
fn unused_url() -> String {
    format!("redis://127.0.0.1:{}/", RedisServer::unused_port())
}

/// The deployments a Redis store reaches.
enum Deployment {
    Standalone(TestRedis),
    Cluster(RedisCluster),
    Sentinel(RedisSentinel),
}

struct Redis(Deployment);

impl Harness for Redis {
    type Store = RedisStore;

    async fn store(&self) -> RedisStore {
        match &self.0 {
            Deployment::Standalone(redis) => redis.store().await,
            Deployment::Cluster(cluster) => cluster.store().await,
            Deployment::Sentinel(sentinel) => {
                let urls = sentinel.sentinel_urls();
                let config = RedisConfig::new().response_timeout(DEADLINE);
                let sentinels = urls.iter().map(String::as_str);
                RedisStore::connect_sentinel(sentinels, RedisSentinel::SERVICE, config)
                    .await
                    .expect("connect through the test Sentinels")
            }
        }
    }

    async fn check_at(
        &self,
        store: &RedisStore,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Result<Decision, Error> {
        store.check_at(key, policy, cost, now_us).await
    }

    /// The same deployment, on a port nothing listens on (the store's
    /// default deadlines).
    async fn peek_at(
        &self,
        store: &RedisStore,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Option<Result<Decision, Error>> {
        Some(store.peek_at(key, policy, cost, now_us).await)
    }

    async fn check_refundable_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Option<Result<(Decision, Option<limiter_core::Receipt>), Error>> {
        Some(store.check_refundable_at(key, policy, cost, now_us).await)
    }

    async fn penalize_at(
        &self,
        store: &RedisStore,
        key: &str,
        penalty: &limiter_core::Penalty,
        now_us: u64,
    ) -> Option<Result<Option<Duration>, Error>> {
        Some(store.penalize_at(key, penalty, now_us).await)
    }

    async fn unreachable(&self) -> Option<RedisStore> {
        let url = unused_url();
        let store = match &self.0 {
            Deployment::Standalone(_) => RedisStore::open(&url),
            Deployment::Cluster(_) => RedisStore::open_cluster([url.as_str()]),
            Deployment::Sentinel(_) => {
                RedisStore::open_sentinel([url.as_str()], RedisSentinel::SERVICE)
            }
        };
        Some(store.expect("a valid URL"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_standalone_conforms() {
    conformance::run(&Redis(Deployment::Standalone(limiter_tests::redis()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_conforms() {
    conformance::run(&Redis(Deployment::Cluster(RedisCluster::start()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_sentinel_conforms() {
    conformance::run(&Redis(Deployment::Sentinel(RedisSentinel::start(3)))).await;
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
/// the other algorithms. It keeps no concurrency permits.
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
