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
//! store's response timeout bounds the whole of it.

use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::scripts::Lua;

/// Redirections followed for one call; the call's deadline (the store's
/// response timeout, which covers the whole call) bounds the time.
const MAX_REDIRECTS: usize = 16;

/// Runs `call`; `redirected` is told of every MOVED, ASK and READONLY (the
/// slot map has changed).
pub(crate) async fn run(
    connection: &mut ClusterConnection,
    lua: &Lua,
    call: &Cmd,
    redirected: impl Fn(),
) -> RedisResult<Vec<i64>> {
    let mut asking: Option<(String, u16)> = None;
    let mut redirects = 0;
    loop {
        let outcome = match &asking {
            None => run_routed(connection, lua, call).await,
            Some((host, port)) => run_asking(connection, lua, call, host, *port).await,
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

/// The call, routed by its key, loading the script where it is missing.
async fn run_routed(
    connection: &mut ClusterConnection,
    lua: &Lua,
    call: &Cmd,
) -> RedisResult<Vec<i64>> {
    match call.query_async(connection).await {
        Err(error) if is_noscript(&error) => {
            // SCRIPT LOAD goes to every master.
            let _: redis::Value = lua.load_command().query_async(connection).await?;
            call.query_async(connection).await
        }
        outcome => outcome,
    }
}

/// `ASKING` then the call, on the node importing the key's slot.
async fn run_asking(
    connection: &mut ClusterConnection,
    lua: &Lua,
    call: &Cmd,
    host: &str,
    port: u16,
) -> RedisResult<Vec<i64>> {
    let node = || SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port,
    };
    let mut pipeline = redis::pipe();
    pipeline.cmd("ASKING").add_command(call.clone());
    let reply = match connection
        .route_pipeline(pipeline.clone(), 1, 1, node())
        .await
    {
        Err(error) if is_noscript(&error) => {
            connection
                .route_command(lua.load_command(), RoutingInfo::SingleNode(node()))
                .await?;
            connection.route_pipeline(pipeline, 1, 1, node()).await?
        }
        outcome => outcome?,
    };
    let value = reply.into_iter().next().unwrap_or(redis::Value::Nil);
    redis::from_redis_value(value).map_err(Into::into)
}

fn is_noscript(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// The `host:port` an ASK names.
fn address(error: &RedisError) -> Option<(String, u16)> {
    let (node, _slot) = error.redirect_node()?;
    let (host, port) = node.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?))
}
