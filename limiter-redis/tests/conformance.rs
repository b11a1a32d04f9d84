//! The Redis store (standalone, Cluster, Sentinel) runs the store
//! conformance suite as any store crate would: `limiter-conformance` as a
//! dev-dependency, a harness of a few methods, servers of its own that the
//! shared test harness (`limiter-tests`) starts. The suite's times go
//! through `RedisStore::check_at` (the `test-util` feature), its own through
//! `Store::check` on the servers' clocks.

use std::time::Duration;

use limiter_conformance::{self as conformance, Harness};
use limiter_core::{Decision, Error, Policy};
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
