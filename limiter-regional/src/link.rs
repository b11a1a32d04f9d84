//! How the regional store reaches a region's Redis: the one place that
//! talks to redis-rs.
//!
//! A script is sent with EVALSHA and loaded only when the server answers
//! NOSCRIPT, which means the call did not run; nothing that may have run is
//! sent again. Every call keeps the deadline of its link as a whole,
//! connecting included (an attempt cut short goes on at the next call).
//! Connections are held as the Redis store holds its own: a connection the
//! server closed while idle is never used, a fresh one is made first.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::region::Endpoint;
use limiter_core::Error;
use limiter_redis::connection::Link as Reconnecting;
use limiter_redis::connection::Multiplexed;
use limiter_redis::lua::{self, Lua, Routed};

/// A script of the regional store: the shebang (the script declares no
/// flag, so Redis refuses it whole while over `maxmemory` and on a replica,
/// as the Redis store's scripts), the prelude (the time and the cost) and
/// helpers of the Redis store's scripts, the regional scripts' shared part
/// (`shared.lua`), then the files it names. A key's scripts touch only
/// `KEYS[1]`; the heartbeats' touch their two hashes, in one slot.
macro_rules! script {
    ($($file:literal),+) => {
        Lua::new(&[
            lua::SHEBANG,
            lua::PRELUDE,
            lua::HELPERS,
            include_str!("scripts/shared.lua"),
            $(include_str!(concat!("scripts/", $file)),)+
        ])
    };
}

/// The decision: counts locally against this region's lease.
pub(crate) static CHECK: Lua = script!("check.lua");
/// Another region's ask, answered here: the spare share given.
pub(crate) static GIVE: Lua = script!("give.lua");
/// What the others gave, added to this region's lease.
pub(crate) static CREDIT: Lua = script!("credit.lua");
/// A reset or a refund of this region's counts.
pub(crate) static ADJUST: Lua = script!("adjust.lua");
/// What this region knows of a key's counts, read.
pub(crate) static KNOWN: Lua = script!("known.lua");
/// A heartbeat, answered by another region.
pub(crate) static BEAT: Lua = script!("records.lua", "beat.lua");
/// This region's contacts with the others, recorded and read.
pub(crate) static CONTACTS: Lua = script!("records.lua", "contacts.lua");

/// A connection to one region's Redis, and the deadline of each call.
pub(crate) struct Link {
    deadline: Duration,
    connection_timeout: Duration,
    backend: Backend,
}

/// Each held and made again as the Redis store holds its own (see
/// [`Reconnecting`]): one way for every Redis link.
enum Backend {
    Standalone {
        client: redis::Client,
        config: AsyncConnectionConfig,
        held: Arc<Reconnecting<Multiplexed>>,
    },
    Cluster {
        client: ClusterClient,
        held: Arc<Reconnecting<ClusterConnection>>,
    },
}

impl Link {
    /// A link that connects on first use (and again after a connection
    /// breaks, or is closed by the server while idle), each call failing
    /// after `deadline`.
    pub(crate) fn open(
        endpoint: &Endpoint,
        deadline: Duration,
        connection_timeout: Duration,
    ) -> RedisResult<Self> {
        let backend = match endpoint {
            Endpoint::Standalone(url) => Backend::Standalone {
                client: redis::Client::open(url.as_str())?,
                config: AsyncConnectionConfig::new()
                    .set_response_timeout(Some(deadline))
                    .set_connection_timeout(Some(connection_timeout)),
                held: Reconnecting::new(),
            },
            Endpoint::Cluster(seeds) => Backend::Cluster {
                client: ClusterClient::builder(seeds.clone())
                    // The client's own retries would resend a script after
                    // an I/O error, when it may already have run.
                    .retries(0)
                    .response_timeout(deadline)
                    .connection_timeout(connection_timeout)
                    .build()?,
                held: Reconnecting::new(),
            },
        };
        Ok(Self {
            deadline,
            connection_timeout,
            backend,
        })
    }

    /// Runs `call`, an EVALSHA of `lua` (made by [`Lua::call`]).
    pub(crate) async fn eval(&self, lua: &Lua, call: &Cmd) -> Result<Vec<i64>, Error> {
        self.eval_as(lua, call).await
    }

    /// Runs `call` like [`eval`](Self::eval), its reply read as `T`.
    pub(crate) async fn eval_as<T: redis::FromRedisValue>(
        &self,
        lua: &Lua,
        call: &Cmd,
    ) -> Result<T, Error> {
        self.within_deadline(async {
            let mut connected = self.connect().await?;
            let result = lua::run(&mut Routed(&mut connected), lua, call).await;
            self.settle(&connected, result)
        })
        .await
    }

    /// The held connection, made first when there is none or it is known
    /// closed.
    async fn connect(&self) -> Result<Connected, Error> {
        let timeout = self.connection_timeout;
        Ok(match &self.backend {
            Backend::Standalone {
                client,
                config,
                held,
            } => {
                let (client, config) = (client.clone(), config.clone());
                let connect = || async move { Multiplexed::open(&client, &config).await };
                let (connection, id) = held.get(connect, timeout).await?;
                Connected::Standalone(connection, id)
            }
            Backend::Cluster { client, held } => {
                let client = client.clone();
                let connect = || async move { client.get_async_connection().await };
                let (connection, id) = held.get(connect, timeout).await?;
                Connected::Cluster(connection, id)
            }
        })
    }

    /// Forgets the connection when `result` shows it broken, so the next
    /// call connects afresh (this one is not sent again: it may have run).
    fn settle<T>(&self, connected: &Connected, result: RedisResult<T>) -> Result<T, Error> {
        result.map_err(|error| {
            if error.is_connection_dropped()
                || error.is_unrecoverable_error()
                || error.is_io_error()
            {
                match (&self.backend, connected) {
                    (Backend::Standalone { held, .. }, Connected::Standalone(_, id)) => {
                        held.forget(*id)
                    }
                    (Backend::Cluster { held, .. }, Connected::Cluster(_, id)) => held.forget(*id),
                    _ => {}
                }
            }
            limiter_redis::redis_error(error)
        })
    }

    async fn within_deadline<T>(
        &self,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::time::timeout(self.deadline, call)
            .await
            .unwrap_or(Err(Error::Timeout(self.deadline)))
    }
}

/// A connection taken from a link, and its id there.
enum Connected {
    Standalone(Multiplexed, u64),
    Cluster(ClusterConnection, u64),
}

impl ConnectionLike for Connected {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Standalone(connection, _) => connection.connection.req_packed_command(cmd),
            Self::Cluster(connection, _) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Standalone(connection, _) => connection
                .connection
                .req_packed_commands(pipeline, offset, count),
            Self::Cluster(connection, _) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Standalone(connection, _) => connection.connection.get_db(),
            Self::Cluster(connection, _) => connection.get_db(),
        }
    }
}
