//! The Redis store (standalone, Cluster, Sentinel) runs the store
//! conformance suite as any store crate would: `limiter-conformance` as a
//! dev-dependency, a harness of a few methods, servers of its own that the
//! shared test harness (`limiter-tests`) starts. The suite's times reach
//! the scripts through `RedisConfig::manual_clock` (the `test-util`
//! feature); its own are the servers' clocks.

use std::time::Duration;

use limiter_conformance::{self as conformance, Harness};
use limiter_core::ManualClock;
use limiter_redis::{RedisConfig, RedisStore};
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

/// The tests' settings, on `clock` when given.
fn config(clock: Option<ManualClock>) -> RedisConfig {
    let config = RedisConfig::new().response_timeout(DEADLINE);
    match clock {
        Some(clock) => config.manual_clock(clock),
        None => config,
    }
}

impl Harness for Redis {
    type Store = RedisStore;

    async fn store(&self, clock: Option<ManualClock>) -> RedisStore {
        let config = config(clock);
        match &self.0 {
            Deployment::Standalone(redis) => redis.store_with(config).await,
            Deployment::Cluster(cluster) => cluster.store_with(config).await,
            Deployment::Sentinel(sentinel) => {
                let urls = sentinel.sentinel_urls();
                let sentinels = urls.iter().map(String::as_str);
                RedisStore::connect_sentinel(sentinels, RedisSentinel::SERVICE, config)
                    .await
                    .expect("connect through the test Sentinels")
            }
        }
    }

    /// The same deployment, on a port nothing listens on (the store's
    /// default deadlines).
    async fn unreachable(&self, clock: Option<ManualClock>) -> Option<RedisStore> {
        let url = unused_url();
        let config = match clock {
            Some(clock) => RedisConfig::new().manual_clock(clock),
            None => RedisConfig::new(),
        };
        let store = match &self.0 {
            Deployment::Standalone(_) => RedisStore::open_with(&url, config),
            Deployment::Cluster(_) => RedisStore::open_cluster_with([url.as_str()], config),
            Deployment::Sentinel(_) => {
                RedisStore::open_sentinel_with([url.as_str()], RedisSentinel::SERVICE, config)
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
