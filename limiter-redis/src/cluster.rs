//! Running a script on Redis Cluster without ever replaying a call that may
//! have executed.
//!
//! The cluster client is built with no retries of its own: it would resend a
//! command after an I/O error, when the command may already have run. This
//! module retries only the answers that prove the command did not run:
//! MOVED (the slot lives elsewhere: the client refreshes its slot map and the
//! call is routed again), ASK (the slot is migrating and the key has moved:
//! `ASKING` and the call go to the importing node), READONLY (the node was
//! demoted to a replica, which refuses the script before running it: the
//! call is routed again once the slot map is refreshed), TRYAGAIN and
//! CLUSTERDOWN, and NOSCRIPT (the script is loaded on that node first). The
//! store's response timeout bounds the whole of it. A call of several keys
//! goes to the node it names ([`run_on`]). Also here: what the store holds
//! of a Cluster ([`Cluster`]).

use std::sync::Arc;
use std::time::Duration;

use limiter_core::Error;
use redis::Client;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::link::Link;
use super::lua::{self, Lua, OnNode, Routed};
use super::redis_error;
use super::slots::SlotTable;

/// Redirections followed for one call; the call's deadline (the store's
/// response timeout, which covers the whole call) bounds the time.
const MAX_REDIRECTS: usize = 16;

/// Runs `call`; `redirected` is told of every MOVED, ASK and READONLY (the
/// slot map has changed).
pub(crate) async fn run<T: redis::FromRedisValue>(
    connection: &mut ClusterConnection,
    lua: &Lua,
    call: &Cmd,
    redirected: impl Fn(),
) -> RedisResult<T> {
    let mut asking: Option<(String, u16)> = None;
    let mut redirects = 0;
    loop {
        let outcome = match &asking {
            None => lua::run(&mut Routed(connection), lua, call).await,
            Some((host, port)) => {
                let mut node = OnNode {
                    connection,
                    host,
                    port: *port,
                    asking: true,
                };
                lua::run(&mut node, lua, call).await
            }
        };
        let error = match outcome {
            Ok(reply) => return Ok(reply),
            Err(error) if redirects < MAX_REDIRECTS => error,
            Err(error) => return Err(error),
        };
        redirects += 1;
        if matches!(
            error.kind(),
            ErrorKind::Server(
                ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::ReadOnly
            )
        ) {
            redirected();
        }
        match error.kind() {
            // READONLY: the node was demoted to a replica (a failover)
            // and refused the script before running it.
            ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::ReadOnly) => {
                // The client refreshes its slot map; give it a moment.
                asking = None;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            ErrorKind::Server(ServerErrorKind::Ask) => match address(&error) {
                Some(node) => asking = Some(node),
                None => return Err(error),
            },
            ErrorKind::Server(ServerErrorKind::TryAgain | ServerErrorKind::ClusterDown) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            _ => return Err(error),
        }
    }
}

/// Runs `call`, a script of undeclared keys, on the node at `address`
/// (`host:port`), loading it there on NOSCRIPT. Nothing else is retried: a
/// refusal that proves nothing ran (READONLY, CLUSTERDOWN, TRYAGAIN) is
/// the caller's to answer, by sending each key's check on its own.
pub(crate) async fn run_on<T: redis::FromRedisValue>(
    connection: &mut ClusterConnection,
    lua: &Lua,
    call: &Cmd,
    address: &str,
) -> RedisResult<T> {
    let Some((host, port)) = host_port(address) else {
        return Err(RedisError::from((
            ErrorKind::Client,
            "a node without an address",
            address.to_owned(),
        )));
    };
    let mut node = OnNode {
        connection,
        host,
        port,
        asking: false,
    };
    lua::run(&mut node, lua, call).await
}

/// Whether `error` proves that the call did not run (the node refused it
/// whole): what may be sent again.
pub(crate) fn did_not_run(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::ReadOnly
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
        )
    )
}

/// The `host:port` an ASK names.
fn address(error: &RedisError) -> Option<(String, u16)> {
    let (node, _slot) = error.redirect_node()?;
    let (host, port) = host_port(node)?;
    Some((host.to_owned(), port))
}

/// `host:port` cut at its last colon (a host may be an IPv6 address).
fn host_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

/// A Cluster as the store reaches it.
pub(crate) struct Cluster {
    pub(crate) client: ClusterClient,
    /// The seeds as given: how to reach a node (its credentials too).
    pub(crate) seeds: Vec<redis::ConnectionInfo>,
    /// Made once: the cluster connection follows the cluster's changes itself.
    pub(crate) link: Arc<Link<ClusterConnection>>,
    /// Which node serves which slot: the failure domain of each key.
    pub(crate) slots: Arc<SlotTable>,
}

impl Cluster {
    /// A client for the node serving `name`'s slot, as last read; the first
    /// seed while the slots are not known.
    pub(crate) fn channel_node(&self, name: &str) -> Result<Client, Error> {
        let seed = (self.seeds.first().cloned())
            .ok_or_else(|| Error::Protocol("a Cluster without seeds".into()))?;
        let node = self
            .slots
            .name(self.slots.domain(name))
            .and_then(|address| tcp(&address));
        let info = match node {
            Some(address) => seed.set_addr(address),
            None => seed,
        };
        Client::open(info).map_err(redis_error)
    }
}

/// `host:port` as a connection address.
fn tcp(address: &str) -> Option<redis::ConnectionAddr> {
    let (host, port) = host_port(address)?;
    Some(redis::ConnectionAddr::Tcp(host.to_owned(), port))
}
