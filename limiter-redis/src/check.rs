//! A check's way to Redis: one script call, deciding one request or a
//! coalesced batch of them, within the response timeout as a whole.

use redis::Cmd;
use tokio::time::Instant;

use super::scripts::{self, Lua};
use super::{Backend, RedisStore, batch, cluster, coalesce};
use limiter_core::Decision;
use limiter_core::Error;
use limiter_core::Policy;

/// Histogram: how many requests each script call decided.
const BATCH_SIZE: &str = "limiter_redis_batch_size";
/// Counter: script calls sent to Redis by checks.
const CALLS: &str = "limiter_redis_calls_total";

impl RedisStore {
    /// One check: coalesced with the checks of the same key and policy in
    /// flight (unless turned off), else a call of its own.
    pub(super) async fn run(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        self.subscribe();
        if self.inner.config.coalesce {
            return coalesce::check(self, key, policy, cost, now).await;
        }
        self.decide_one(key, policy, cost, now).await
    }

    /// One request in a call of its own (the algorithm's own script).
    pub(super) async fn decide_one(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        let lua = scripts::lua(policy.algorithm());
        let call = scripts::evalsha(key, policy, cost, now);
        let reply = self.script(lua, &call, 1).await?;
        scripts::parse_reply(&reply, policy, cost)
    }

    /// The requests of `costs`, in this order, in one call of the batch
    /// script, answered by `until` (the latest of its callers' deadlines)
    /// or abandoned.
    pub(super) async fn decide_batch(
        &self,
        key: &str,
        policy: &Policy,
        costs: &[u64],
        now: Option<u64>,
        until: Instant,
    ) -> Result<Vec<Decision>, Error> {
        let lua = batch::lua(policy.algorithm());
        let call = batch::evalsha(key, policy, costs, now);
        let reply = self.script_until(lua, &call, costs.len(), until).await?;
        batch::parse_reply(&reply, policy, costs)
    }

    /// Runs `call` (deciding `decisions` requests) within the response
    /// timeout as a whole: connecting, loading the script and following
    /// redirections included. Past it the call is abandoned (the connection
    /// attempt goes on for the next call) and never replayed.
    pub(super) async fn script(
        &self,
        lua: &Lua,
        call: &Cmd,
        decisions: usize,
    ) -> Result<Vec<i64>, Error> {
        self.script_until(lua, call, decisions, self.deadline())
            .await
    }

    /// [`script`](Self::script), answered by `until` or abandoned.
    async fn script_until(
        &self,
        lua: &Lua,
        call: &Cmd,
        decisions: usize,
        until: Instant,
    ) -> Result<Vec<i64>, Error> {
        metrics::counter!(CALLS).increment(1);
        metrics::histogram!(BATCH_SIZE).record(decisions as f64);
        self.bounded_call_until(lua, call, until).await
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

    async fn bounded_call_until(
        &self,
        lua: &Lua,
        call: &Cmd,
        until: Instant,
    ) -> Result<Vec<i64>, Error> {
        let timeout = self.inner.config.response_timeout;
        let reply = match tokio::time::timeout_at(until, self.call(lua, call)).await {
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
    pub(super) async fn call(&self, lua: &Lua, call: &Cmd) -> Result<Vec<i64>, Error> {
        match &self.inner.backend {
            Backend::Primary(primary) => primary.run(lua, call, &self.inner.config).await,
            Backend::Cluster(cluster) => {
                let connection = self.cluster(cluster).await?;
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
