//! Sending a script by its SHA1, and loading it where the server lacks it:
//! the one NOSCRIPT → `SCRIPT LOAD` → retry path of every Redis store.
//!
//! NOSCRIPT means the server ran nothing, so the call is sent once more
//! after the script is loaded. No other answer leads to a second sending
//! here: the callers retry only the answers that prove nothing ran
//! (READONLY, MASTERDOWN, MOVED, ASK, ...), and never after an I/O error or
//! a timeout, when the call may have executed.

use std::sync::OnceLock;

use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, Script, ServerErrorKind};

/// The shebang every script of ours that writes opens with: no flag
/// declared, so Redis refuses the whole script while over `maxmemory` and
/// on a replica.
pub const SHEBANG: &str = "#!lua\n";
/// The shebang of a script that only reads: Redis runs it while over
/// `maxmemory`, and refuses a write in it.
pub const READ_ONLY_SHEBANG: &str = "#!lua flags=no-writes\n";
/// The shebang of the scripts checking several keys of one node: on a
/// Cluster, in any of the node's slots (they declare no keys).
pub const CROSS_SLOT_SHEBANG: &str = "#!lua flags=allow-cross-slot-keys\n";
/// The part every script shares: the time (the server's, or the caller's
/// under test) and the cost, read from the arguments, and `db`, the
/// `call` and `pcall` of Redis through which the helpers reach it.
pub const PRELUDE: &str = include_str!("scripts/prelude.lua");
/// Helpers shared by the scripts of the counter and bucket algorithms
/// (whole-number division, integers as text, a TTL, reading a state's
/// hash), then those of the other scripts (reads, expiry); they follow
/// [`PRELUDE`].
pub const HELPERS: &str = concat!(
    include_str!("scripts/helpers.lua"),
    include_str!("scripts/reads.lua")
);

/// How many arguments a call has room for from the start (a check has 10
/// with its command, a sliding log of 2 rules 13), and how many bytes for
/// those after the key.
const CALL_ARGS: usize = 16;
const CALL_ARGS_BYTES: usize = 96;

/// A script: the parts its source is joined from (the first starting with
/// the `#!lua` shebang), and its source and SHA1, joined and computed once
/// on first use. Built from parts so that a store built on this crate can
/// share [`PRELUDE`] and [`HELPERS`] with its own Lua.
#[derive(Debug)]
pub struct Lua {
    parts: &'static [&'static str],
    compiled: OnceLock<(String, String)>,
}

impl Lua {
    /// The script whose source is `parts` joined.
    pub const fn new(parts: &'static [&'static str]) -> Self {
        Self {
            parts,
            compiled: OnceLock::new(),
        }
    }

    fn compiled(&self) -> &(String, String) {
        self.compiled.get_or_init(|| {
            let source = self.parts.concat();
            let hash = Script::new(&source).get_hash().to_owned();
            (source, hash)
        })
    }

    /// The script's source.
    pub fn source(&self) -> &str {
        &self.compiled().0
    }

    /// The script's SHA1, as EVALSHA takes it.
    pub fn hash(&self) -> &str {
        &self.compiled().1
    }

    /// `EVALSHA {sha} 1 {key}`, to which the caller adds the arguments.
    pub fn call(&self, key: &str) -> Cmd {
        // Room for a check's arguments from the start: the buffers would
        // otherwise grow several times on every call.
        let hash = self.hash();
        let mut cmd = Cmd::with_capacity(
            CALL_ARGS,
            "EVALSHA1".len() + hash.len() + key.len() + CALL_ARGS_BYTES,
        );
        cmd.arg("EVALSHA").arg(hash).arg(1).arg(key);
        cmd
    }

    /// `EVALSHA {sha} {n} {keys...}`, for a script of several keys (all in
    /// one slot: a Cluster routes the call by the first).
    pub fn call_keys(&self, keys: &[&str]) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.hash()).arg(keys.len()).arg(keys);
        cmd
    }

    /// `EVALSHA {sha} 0`, for a script whose keys are among its arguments
    /// (a Cluster cannot route it: it goes to a node named).
    pub fn call_undeclared(&self) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.hash()).arg(0);
        cmd
    }

    /// `SCRIPT LOAD`, for a server that answered NOSCRIPT.
    pub fn load_command(&self) -> Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.source());
        cmd
    }
}

/// Where a call goes, and where its script is loaded when missing.
#[allow(async_fn_in_trait)]
pub trait Node {
    /// Sends `call`.
    async fn send<T: FromRedisValue>(&mut self, call: &Cmd) -> RedisResult<T>;
    /// Loads `lua`'s script where `send` sends.
    async fn load(&mut self, lua: &Lua) -> RedisResult<()>;
}

/// Runs `call` (an EVALSHA of `lua`) on `node`; on NOSCRIPT, loads `lua`
/// there and sends `call` once more.
pub async fn run<T: FromRedisValue>(node: &mut impl Node, lua: &Lua, call: &Cmd) -> RedisResult<T> {
    match node.send(call).await {
        Err(error) if is_noscript(&error) => {
            node.load(lua).await?;
            node.send(call).await
        }
        outcome => outcome,
    }
}

fn is_noscript(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// A connection that routes the call itself: a standalone node, or a
/// cluster by the call's key (where `SCRIPT LOAD` goes to every master).
#[derive(Debug)]
pub struct Routed<'a, C>(pub &'a mut C);

impl<C: ConnectionLike + Send> Node for Routed<'_, C> {
    async fn send<T: FromRedisValue>(&mut self, call: &Cmd) -> RedisResult<T> {
        call.query_async(self.0).await
    }

    async fn load(&mut self, lua: &Lua) -> RedisResult<()> {
        let _: redis::Value = lua.load_command().query_async(self.0).await?;
        Ok(())
    }
}

/// One node of a cluster, by its address: a call whose keys the cluster
/// cannot route, or one that answered ASK (`asking`: the call goes after
/// `ASKING`, in a pipeline). The script is loaded on that node.
pub(crate) struct OnNode<'a> {
    pub(crate) connection: &'a mut ClusterConnection,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) asking: bool,
}

impl OnNode<'_> {
    fn node(&self) -> SingleNodeRoutingInfo {
        SingleNodeRoutingInfo::ByAddress {
            host: self.host.to_owned(),
            port: self.port,
        }
    }
}

impl Node for OnNode<'_> {
    async fn send<T: FromRedisValue>(&mut self, call: &Cmd) -> RedisResult<T> {
        let node = self.node();
        if !self.asking {
            let reply = (self.connection)
                .route_command(call.clone(), RoutingInfo::SingleNode(node))
                .await?;
            // A server's error comes as a value: NOSCRIPT must be an error.
            return redis::from_redis_value(reply.extract_error()?).map_err(Into::into);
        }
        let mut pipeline = redis::pipe();
        pipeline.cmd("ASKING").add_command(call.clone());
        let reply = self.connection.route_pipeline(pipeline, 1, 1, node).await?;
        let value = reply.into_iter().next().unwrap_or(redis::Value::Nil);
        redis::from_redis_value(value.extract_error()?).map_err(Into::into)
    }

    async fn load(&mut self, lua: &Lua) -> RedisResult<()> {
        let node = RoutingInfo::SingleNode(self.node());
        self.connection
            .route_command(lua.load_command(), node)
            .await?;
        Ok(())
    }
}
