//! The Redis store: state shared by every instance of a service, on a
//! standalone Redis or a Redis Cluster.
//!
//! Each algorithm is one Lua script (in `scripts/`, sharing `prelude.lua`;
//! all but the sliding log also share `helpers.lua`) that touches one key,
//! so a check is one atomic round trip and, on a
//! cluster, runs on the node owning that key's slot. Scripts are sent by SHA1
//! (EVALSHA) and loaded only when the server answers NOSCRIPT, which means
//! the call did not run. No call that may have executed is ever sent again.

mod cluster;
mod scripts;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client};
use tokio::sync::OnceCell;

use crate::decision::Decision;
use crate::error::Error;
use crate::policy::Policy;
use crate::store::Store;

/// How the Redis store connects and how long it waits.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    response_timeout: Duration,
    connection_timeout: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            response_timeout: crate::DEFAULT_DEADLINE,
            connection_timeout: Duration::from_millis(500),
        }
    }
}

impl RedisConfig {
    /// The default: 50 ms per call, 500 ms to connect.
    pub fn new() -> Self {
        Self::default()
    }

    /// The deadline of one call: past it the call fails with a timeout and
    /// is not replayed (it may have executed).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The deadline of establishing a connection.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }
}

/// The Redis store: exact and shared across every instance of a service.
///
/// One multiplexed connection carries all checks (clones share it); when it
/// breaks, the next call connects afresh. Time is the Redis server's.
///
/// ```no_run
/// use limiter_core::{Limiter, RedisStore};
///
/// # async fn run() -> Result<(), limiter_core::Error> {
/// // Connects now, and fails if Redis cannot be reached:
/// let limiter = Limiter::new(RedisStore::connect("redis://127.0.0.1:6379/").await?);
/// // Connects on first use, so a service starts while Redis is down:
/// let limiter = Limiter::new(RedisStore::open("redis://127.0.0.1:6379/")?);
/// // A Redis Cluster, from its seed nodes:
/// let limiter = Limiter::new(RedisStore::open_cluster([
///     "redis://10.0.0.1:6379/",
///     "redis://10.0.0.2:6379/",
/// ])?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    config: RedisConfig,
}

enum Backend {
    Standalone(Box<Standalone>),
    Cluster(Box<Cluster>),
}

struct Standalone {
    client: Client,
    /// The shared multiplexed connection; dropped when it breaks, so the
    /// next call (the breaker's probe, while Redis is down) connects afresh.
    connection: Mutex<Option<MultiplexedConnection>>,
}

struct Cluster {
    client: ClusterClient,
    connection: OnceCell<ClusterConnection>,
}

impl RedisStore {
    /// Connects to a standalone Redis at `url` with [`RedisConfig::default`].
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(url, RedisConfig::default()).await
    }

    /// Connects to a standalone Redis at `url`.
    pub async fn connect_with(url: &str, config: RedisConfig) -> Result<Self, Error> {
        Self::open_with(url, config)?.connected().await
    }

    /// A store for the standalone Redis at `url` that connects on first use
    /// (and again on later uses while it cannot), so a service can start
    /// while Redis is down. Fails only for a malformed URL.
    pub fn open(url: &str) -> Result<Self, Error> {
        Self::open_with(url, RedisConfig::default())
    }

    /// [`open`](Self::open) with a configuration.
    pub fn open_with(url: &str, config: RedisConfig) -> Result<Self, Error> {
        let backend = Backend::Standalone(Box::new(Standalone {
            client: Client::open(url)?,
            connection: Mutex::new(None),
        }));
        Ok(Self::from_backend(backend, config))
    }

    /// Connects to a Redis Cluster through any of its nodes (`seeds`, URLs).
    pub async fn connect_cluster<'a>(
        seeds: impl IntoIterator<Item = &'a str>,
        config: RedisConfig,
    ) -> Result<Self, Error> {
        Self::open_cluster_with(seeds, config)?.connected().await
    }

    /// A store for the Redis Cluster reachable through `seeds` (URLs) that
    /// connects on first use, like [`open`](Self::open).
    pub fn open_cluster<'a>(seeds: impl IntoIterator<Item = &'a str>) -> Result<Self, Error> {
        Self::open_cluster_with(seeds, RedisConfig::default())
    }

    /// [`open_cluster`](Self::open_cluster) with a configuration.
    pub fn open_cluster_with<'a>(
        seeds: impl IntoIterator<Item = &'a str>,
        config: RedisConfig,
    ) -> Result<Self, Error> {
        let client = ClusterClient::builder(seeds.into_iter().collect::<Vec<_>>())
            // The client's own retries would resend after I/O errors; the
            // store retries only what provably did not run (see cluster.rs).
            .retries(0)
            .response_timeout(config.response_timeout)
            .connection_timeout(config.connection_timeout)
            .build()?;
        let backend = Backend::Cluster(Box::new(Cluster {
            client,
            connection: OnceCell::new(),
        }));
        Ok(Self::from_backend(backend, config))
    }

    fn from_backend(backend: Backend, config: RedisConfig) -> Self {
        Self {
            inner: Arc::new(Inner { backend, config }),
        }
    }

    async fn connected(self) -> Result<Self, Error> {
        match &self.inner.backend {
            Backend::Standalone(_) => drop(self.standalone().await?),
            Backend::Cluster(_) => drop(self.cluster().await?),
        }
        Ok(self)
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.backend, Backend::Cluster(_))
    }

    fn standalone_parts(&self) -> &Standalone {
        match &self.inner.backend {
            Backend::Standalone(standalone) => standalone,
            Backend::Cluster(_) => unreachable!("called for a standalone store only"),
        }
    }

    async fn standalone(&self) -> Result<MultiplexedConnection, Error> {
        let standalone = self.standalone_parts();
        if let Some(connection) = lock(&standalone.connection).clone() {
            return Ok(connection);
        }
        let config = AsyncConnectionConfig::new()
            .set_response_timeout(Some(self.inner.config.response_timeout))
            .set_connection_timeout(Some(self.inner.config.connection_timeout));
        let connection = standalone
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *lock(&standalone.connection) = Some(connection.clone());
        Ok(connection)
    }

    /// Forgets a connection that broke, so the next call connects afresh.
    fn forget_if_broken(&self, error: &redis::RedisError) {
        if error.is_connection_dropped() || error.is_unrecoverable_error() || error.is_io_error() {
            *lock(&self.standalone_parts().connection) = None;
        }
    }

    async fn cluster(&self) -> Result<ClusterConnection, Error> {
        let Backend::Cluster(cluster) = &self.inner.backend else {
            unreachable!("called for a cluster store only");
        };
        let connection = cluster
            .connection
            .get_or_try_init(|| cluster.client.get_async_connection())
            .await?;
        Ok(connection.clone())
    }

    /// Checks a request at `now` (microseconds since the Unix epoch) given by
    /// the caller instead of the Redis server's clock. For tests that compare
    /// the stores on the same timestamps only: in production instances with
    /// skewed clocks would disagree.
    #[cfg(feature = "test-util")]
    pub async fn check_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.run(key, policy, cost, Some(now)).await
    }

    /// The Lua source of the script that runs `algorithm`, for benchmarks
    /// that compare the store with a bare EVALSHA of the same script.
    #[cfg(feature = "test-util")]
    pub fn script_source(algorithm: crate::Algorithm) -> &'static str {
        scripts::lua(algorithm).source
    }

    async fn run(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let lua = scripts::lua(policy.algorithm());
        let call = scripts::evalsha(key, policy, cost, now);
        let reply: Vec<i64> = match &self.inner.backend {
            Backend::Standalone(_) => {
                let mut connection = self.standalone().await?;
                let noscript = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);
                let outcome = match call.query_async(&mut connection).await {
                    // NOSCRIPT: the call did not run. Load, then send it again.
                    Err(error) if error.kind() == noscript => {
                        match lua
                            .load_command()
                            .query_async::<redis::Value>(&mut connection)
                            .await
                        {
                            Ok(_) => call.query_async(&mut connection).await,
                            Err(error) => Err(error),
                        }
                    }
                    outcome => outcome,
                };
                outcome.inspect_err(|error| self.forget_if_broken(error))?
            }
            Backend::Cluster(_) => {
                let mut connection = self.cluster().await?;
                cluster::run(&mut connection, lua, &call).await?
            }
        };
        scripts::parse_reply(&reply, policy, cost)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Store for RedisStore {
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.run(key, policy, cost, None).await
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("cluster", &self.is_cluster())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}
