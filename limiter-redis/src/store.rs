//! The store: its connections (a primary, found at a URL or through
//! Sentinel, or a Cluster), its configuration, and its one way to run a
//! script there within the response timeout. Its interface is
//! `capabilities.rs`'s.

use std::fmt;
use std::sync::Arc;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd};
use tokio::time::Instant;

use crate::announcer::Announcer;
use crate::cluster::{self, Cluster};
use crate::config::RedisConfig;
use crate::link::Link;
use crate::primary::{Locator, Primary};
use crate::queue;
use crate::redis_error;
use crate::scripts::Lua;
use crate::sentinel::Sentinels;
use crate::slots::SlotTable;

use limiter_core::Error;

/// The Redis store: exact and shared across every instance of a service.
///
/// One multiplexed connection carries all checks (clones share it); when it
/// breaks, or leads to a node that is no longer the primary, the next call
/// connects afresh. Every call keeps [`RedisConfig::response_timeout`], the
/// connection included. Time is the Redis server's. Checks that meet a
/// call in flight go together in the next call, with the same decisions:
/// those of one key, and those of other keys of its node (on a Cluster, in
/// any of the node's slots) ([`RedisConfig::coalesce`]).
///
/// ```no_run
/// use limiter_core::Limiter;
/// use limiter_redis::RedisStore;
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
/// // The primary that Redis Sentinel names for `mymaster`:
/// let limiter = Limiter::new(RedisStore::open_sentinel(
///     ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/"],
///     "mymaster",
/// )?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) backend: Backend,
    pub(crate) config: RedisConfig,
    /// The checks waiting for their key's call in flight (coalescing).
    pub(crate) pending: queue::Pending,
    /// The checks of other keys waiting for the call in flight.
    pub(crate) gathering: queue::Gathering,
    /// Resets announced to every instance, and this one's subscription.
    pub(crate) announcer: Announcer,
    /// The blocks, plan assignments and live overrides, as this instance
    /// knows them (see `replica.rs`).
    pub(crate) tables: limiter_core::ControlTables,
}

pub(crate) enum Backend {
    /// A standalone Redis, at a URL or behind Sentinel.
    Primary(Box<Primary>),
    Cluster(Box<Cluster>),
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
        let primary = Primary::new(Locator::Url(Client::open(url).map_err(redis_error)?));
        Ok(Self::from_backend(
            Backend::Primary(Box::new(primary)),
            config,
        ))
    }

    /// Connects to the primary that the Redis Sentinels at `sentinels` (URLs)
    /// name for `service` (the name in `sentinel monitor <name> ...`).
    pub async fn connect_sentinel<'a>(
        sentinels: impl IntoIterator<Item = &'a str>,
        service: &str,
        config: RedisConfig,
    ) -> Result<Self, Error> {
        Self::open_sentinel_with(sentinels, service, config)?
            .connected()
            .await
    }

    /// A store for the primary that the Redis Sentinels at `sentinels` (URLs)
    /// name for `service`, connecting on first use like [`open`](Self::open).
    ///
    /// The primary is asked of the Sentinels on every connection, and the
    /// store follows their announcements: after a failover it leaves the old
    /// primary as soon as a Sentinel announces the new one, and a node that
    /// answers as a replica (`READONLY`) is left at once.
    pub fn open_sentinel<'a>(
        sentinels: impl IntoIterator<Item = &'a str>,
        service: &str,
    ) -> Result<Self, Error> {
        Self::open_sentinel_with(sentinels, service, RedisConfig::default())
    }

    /// [`open_sentinel`](Self::open_sentinel) with a configuration.
    pub fn open_sentinel_with<'a>(
        sentinels: impl IntoIterator<Item = &'a str>,
        service: &str,
        config: RedisConfig,
    ) -> Result<Self, Error> {
        let sentinels = Sentinels::new(sentinels, service).map_err(redis_error)?;
        let primary = Primary::new(Locator::Sentinel(Arc::new(sentinels)));
        Ok(Self::from_backend(
            Backend::Primary(Box::new(primary)),
            config,
        ))
    }

    /// Connects to a Redis Cluster through any of its nodes (`seeds`, URLs),
    /// and reads which node serves which slot, so that a guard keeps a
    /// breaker per node from the first call (a store opened with
    /// [`open_cluster`](Self::open_cluster) reads it in the background on
    /// first use).
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
        let seeds = seeds
            .into_iter()
            .map(redis::IntoConnectionInfo::into_connection_info)
            .collect::<Result<Vec<_>, _>>()
            .map_err(redis_error)?;
        let client = ClusterClient::builder(seeds.clone())
            // The client's own retries would resend after I/O errors; the
            // store retries only what provably did not run (see cluster.rs).
            .retries(0)
            .response_timeout(config.response_timeout)
            .connection_timeout(config.connection_timeout)
            .build()
            .map_err(redis_error)?;
        let cluster = Cluster {
            client,
            seeds,
            link: Link::new(),
            slots: SlotTable::new(),
        };
        Ok(Self::from_backend(
            Backend::Cluster(Box::new(cluster)),
            config,
        ))
    }

    fn from_backend(backend: Backend, config: RedisConfig) -> Self {
        let tables = limiter_core::ControlTables::new(config.max_penalty_blocks, || {
            use limiter_core::Clock;
            limiter_core::SystemClock.now_micros()
        });
        Self {
            inner: Arc::new(Inner {
                backend,
                config,
                pending: queue::Pending::default(),
                gathering: queue::Gathering::default(),
                announcer: Announcer::default(),
                tables,
            }),
        }
    }

    async fn connected(self) -> Result<Self, Error> {
        match &self.inner.backend {
            Backend::Primary(primary) => primary.connect(&self.inner.config).await?,
            Backend::Cluster(cluster) => {
                // Its failure domains known before its first call: a guard
                // keeps a breaker per node from the start. Read here, not
                // also in the background.
                let connection = self.cluster_link(cluster).await?;
                if !cluster.slots.is_known() {
                    let timeout = self.inner.config.connection_timeout;
                    cluster.slots.read_now(&connection, timeout).await;
                }
            }
        }
        Ok(self)
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.backend, Backend::Cluster(_))
    }

    /// Whether this store finds its Redis through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        matches!(&self.inner.backend, Backend::Primary(primary) if primary.is_sentinel())
    }

    /// The cluster's connection; while the slot table is unknown, a reading
    /// of it in the background.
    pub(crate) async fn cluster(&self, cluster: &Cluster) -> Result<ClusterConnection, Error> {
        let connection = self.cluster_link(cluster).await?;
        if !cluster.slots.is_known() {
            cluster
                .slots
                .refresh(&connection, self.inner.config.connection_timeout);
        }
        Ok(connection)
    }

    async fn cluster_link(&self, cluster: &Cluster) -> Result<ClusterConnection, Error> {
        let client = cluster.client.clone();
        let connect = || async move { client.get_async_connection().await };
        let (connection, _) = cluster
            .link
            .get(connect, self.inner.config.connection_timeout)
            .await?;
        Ok(connection)
    }

    /// The Lua source of the script that runs `algorithm`, for benchmarks
    /// that compare the store with a bare EVALSHA of the same script.
    #[cfg(feature = "test-util")]
    pub fn script_source(algorithm: limiter_core::Algorithm) -> &'static str {
        crate::scripts::lua(algorithm).source()
    }
}

impl RedisStore {
    /// The time a test's clock gives every call
    /// ([`RedisConfig::manual_clock`](crate::RedisConfig::manual_clock));
    /// `None`: the Redis server's.
    pub(crate) fn test_now(&self) -> Option<u64> {
        use limiter_core::Clock;
        (self.inner.config.manual_clock.as_ref()).map(|clock| clock.now_micros())
    }

    /// When a call made now must have been answered: the response timeout
    /// from now.
    pub(super) fn deadline(&self) -> Instant {
        Instant::now() + self.inner.config.response_timeout
    }

    /// `call` within the response timeout as a whole (see [`script`](Self::script)),
    /// counted in no check's metrics.
    pub(super) async fn bounded_call(&self, lua: &Lua, call: &Cmd) -> Result<Vec<i64>, Error> {
        self.bounded_call_until(lua, call, self.deadline()).await
    }

    pub(crate) async fn bounded_call_until<T: redis::FromRedisValue>(
        &self,
        lua: &Lua,
        call: &Cmd,
        until: Instant,
    ) -> Result<T, Error> {
        self.bounded_call_to(lua, call, None, until).await
    }

    /// [`bounded_call_until`](Self::bounded_call_until) of a call to the
    /// Cluster node of failure domain `node`, when given.
    pub(crate) async fn bounded_call_to<T: redis::FromRedisValue>(
        &self,
        lua: &Lua,
        call: &Cmd,
        node: Option<u64>,
        until: Instant,
    ) -> Result<T, Error> {
        let timeout = self.inner.config.response_timeout;
        let sent = self.call_to(lua, call, node);
        let reply = match tokio::time::timeout_at(until, sent).await {
            // The connection's own timer (its health check, as long as the
            // store's deadline and started later) can fire in the same tick
            // as the deadline, before it: the call timed out all the same.
            // Any other error keeps its kind (an `oom` stays one).
            Ok(Err(Error::Backend(error)))
                if error
                    .downcast_ref::<redis::RedisError>()
                    .is_some_and(redis::RedisError::is_timeout) =>
            {
                Err(Error::Timeout(timeout))
            }
            Ok(reply) => reply,
            Err(_) => Err(Error::Timeout(timeout)),
        };
        if let (Err(_), Backend::Cluster(cluster)) = (&reply, &self.inner.backend) {
            // A failing node may have handed its slots over (a failover).
            if let Some(connection) = cluster.link.current() {
                cluster
                    .slots
                    .refresh(&connection, self.inner.config.connection_timeout);
            }
        }
        reply
    }

    /// `call`, an EVALSHA of `lua`, on the primary or the key's node.
    pub(super) async fn call<T: redis::FromRedisValue>(
        &self,
        lua: &Lua,
        call: &Cmd,
    ) -> Result<T, Error> {
        self.call_to(lua, call, None).await
    }

    /// `call` on the primary; on a Cluster, on the node of failure domain
    /// `node` when given, else on the key's.
    async fn call_to<T: redis::FromRedisValue>(
        &self,
        lua: &Lua,
        call: &Cmd,
        node: Option<u64>,
    ) -> Result<T, Error> {
        match &self.inner.backend {
            Backend::Primary(primary) => primary.run(lua, call, &self.inner.config).await,
            Backend::Cluster(cluster) => {
                let connection = self.cluster(cluster).await?;
                if let Some(node) = node {
                    let address = (cluster.slots.name(node))
                        .ok_or_else(|| Error::Protocol(format!("no Cluster node {node}")))?;
                    return cluster::run_on(&mut connection.clone(), lua, call, &address)
                        .await
                        .map_err(crate::redis_error);
                }
                let refresh = || {
                    cluster
                        .slots
                        .refresh(&connection, self.inner.config.connection_timeout)
                };
                cluster::run(&mut connection.clone(), lua, call, refresh)
                    .await
                    .map_err(crate::redis_error)
            }
        }
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deployment = match &self.inner.backend {
            Backend::Primary(primary) if primary.is_sentinel() => "sentinel",
            Backend::Primary(_) => "standalone",
            Backend::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore")
            .field("deployment", &deployment)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}
