//! How the regional store reaches a region's Redis: the one place that
//! talks to redis-rs.
//!
//! A script is sent with EVALSHA and loaded only when the server answers
//! NOSCRIPT, which means the call did not run; nothing that may have run is
//! sent again. Every call keeps the deadline of its link as a whole,
//! connecting included (an attempt cut short goes on at the next call).

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, RedisResult};
use tokio::sync::OnceCell;

use super::region::Endpoint;
use crate::error::Error;
use crate::store::redis::evalsha::{self, Lua, Routed};

/// A script of the regional store: the shebang (the script declares no
/// flag, so Redis refuses it whole while over `maxmemory` and on a replica,
/// as the Redis store's scripts), the prelude (the time and the cost) and
/// helpers of the Redis store's scripts, the regional scripts' shared part
/// (`shared.lua`), then its own file. Each touches only `KEYS[1]`.
macro_rules! script {
    ($file:literal) => {
        Lua::new(concat!(
            "#!lua\n",
            include_str!("../redis/scripts/prelude.lua"),
            include_str!("../redis/scripts/helpers.lua"),
            include_str!("scripts/shared.lua"),
            include_str!(concat!("scripts/", $file))
        ))
    };
}

/// The decision: counts locally against what the region knows of the others.
pub(crate) static CHECK: Lua = script!("check.lua");
/// What a sync learned and concluded, written into one region.
pub(crate) static MERGE: Lua = script!("merge.lua");

/// A connection to one region's Redis, and the deadline of each call.
pub(crate) struct Link {
    deadline: Duration,
    backend: Backend,
}

enum Backend {
    Standalone(ConnectionManager),
    Cluster(Box<Cluster>),
}

pub(crate) struct Cluster {
    client: ClusterClient,
    connection: OnceCell<ClusterConnection>,
}

impl Link {
    /// A link that connects on first use (and again after a connection
    /// breaks), each call failing after `deadline`.
    pub(crate) fn open(
        endpoint: &Endpoint,
        deadline: Duration,
        connection_timeout: Duration,
    ) -> RedisResult<Self> {
        let backend = match endpoint {
            Endpoint::Standalone(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(deadline))
                    .set_connection_timeout(Some(connection_timeout))
                    // One attempt per call: the caller's breaker decides
                    // when to try again.
                    .set_number_of_retries(0);
                Backend::Standalone(ConnectionManager::new_lazy_with_config(
                    client.clone(),
                    config,
                )?)
            }
            Endpoint::Cluster(seeds) => {
                let client = ClusterClient::builder(seeds.clone())
                    // The client's own retries would resend a script after
                    // an I/O error, when it may already have run.
                    .retries(0)
                    .response_timeout(deadline)
                    .connection_timeout(connection_timeout)
                    .build()?;
                Backend::Cluster(Box::new(Cluster {
                    client,
                    connection: OnceCell::new(),
                }))
            }
        };
        Ok(Self { deadline, backend })
    }

    /// Runs `call`, an EVALSHA of `lua` (made by [`Lua::call`]).
    pub(crate) async fn eval(&self, lua: &Lua, call: &Cmd) -> Result<Vec<i64>, Error> {
        self.within_deadline(async {
            Ok(match &self.backend {
                Backend::Standalone(manager) => {
                    evalsha::run(&mut Routed(&mut manager.clone()), lua, call).await?
                }
                Backend::Cluster(cluster) => {
                    let mut connection = cluster.connection().await?;
                    evalsha::run(&mut Routed(&mut connection), lua, call).await?
                }
            })
        })
        .await
    }

    /// `HMGET key fields...`, each value as text.
    pub(crate) async fn hmget(
        &self,
        key: &str,
        fields: &[&str],
    ) -> Result<Vec<Option<String>>, Error> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(key).arg(fields);
        self.within_deadline(async {
            Ok(match &self.backend {
                Backend::Standalone(manager) => cmd.query_async(&mut manager.clone()).await?,
                Backend::Cluster(cluster) => {
                    cmd.query_async(&mut cluster.connection().await?).await?
                }
            })
        })
        .await
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

impl Cluster {
    async fn connection(&self) -> Result<ClusterConnection, Error> {
        let connection = self
            .connection
            .get_or_try_init(|| self.client.get_async_connection())
            .await?;
        Ok(connection.clone())
    }
}
