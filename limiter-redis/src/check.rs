//! A check's way to Redis: one script call, deciding one request, a
//! coalesced batch of them, or the requests of several keys, within the
//! response timeout as a whole.

use redis::{Cmd, Value};
use tokio::time::Instant;

use super::scripts::{self, Lua};
use super::{RedisStore, batch};
use limiter_core::Decision;
use limiter_core::Error;
use limiter_core::Policy;

/// Histogram: how many requests each script call decided.
const BATCH_SIZE: &str = "limiter_redis_batch_size";
/// Counter: script calls sent to Redis by checks.
const CALLS: &str = "limiter_redis_calls_total";

/// One request in a call of its own (the algorithm's own script).
pub(crate) async fn decide_one(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<Decision, Error> {
    let lua = scripts::lua(policy.algorithm());
    let call = scripts::evalsha(key, policy, cost, now);
    let reply = script(store, lua, &call, 1).await?;
    scripts::parse_reply(&reply, policy, cost)
}

/// The requests of `costs`, in this order, in one call of the batch
/// script, answered by `until` (the latest of its callers' deadlines)
/// or abandoned.
pub(crate) async fn decide_batch(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    costs: &[u64],
    now: Option<u64>,
    until: Instant,
) -> Result<Vec<Decision>, Error> {
    let lua = batch::lua(policy.algorithm());
    let call = batch::evalsha(key, policy, costs, now);
    let reply: Vec<i64> = script_until(store, lua, &call, costs.len(), until).await?;
    batch::parse_reply(&reply, policy, costs)
}

/// A request of `cost` on each of `keys`, in this order, in one call of the
/// algorithm's script of several keys, to the Redis of the store or the
/// Cluster node of failure domain `node`, answered by `until` (the latest
/// of its callers' deadlines) or abandoned. On a Cluster, a key the node
/// does not serve, and each key of a call the node refused whole (it is a
/// replica now, the cluster is down), is checked in a call of its own:
/// nothing of it ran.
pub(crate) async fn decide_keys(
    store: &RedisStore,
    node: u64,
    keys: &[&str],
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
    until: Instant,
) -> Result<Vec<Result<Decision, Error>>, Error> {
    let lua = scripts::sources::keys(policy.algorithm());
    let on_cluster = store.is_cluster();
    let call = scripts::evalsha_keys(lua, keys, policy, cost, now, on_cluster);
    metrics::counter!(CALLS).increment(1);
    metrics::histogram!(BATCH_SIZE).record(keys.len() as f64);
    let node = on_cluster.then_some(node);
    let replies = match store.bounded_call_to(lua, &call, node, until).await {
        Ok(replies) => replies,
        Err(error) if on_cluster && refused_whole(&error) => vec![Value::Nil; keys.len()],
        Err(error) => return Err(error),
    };
    let replies: Vec<Value> = replies;
    if replies.len() != keys.len() {
        return Err(Error::Protocol(format!(
            "{} replies to the checks of {} keys",
            replies.len(),
            keys.len()
        )));
    }
    let mut answers = Vec::with_capacity(keys.len());
    let mut elsewhere = Vec::new();
    for (index, reply) in replies.into_iter().enumerate() {
        if reply == Value::Nil {
            elsewhere.push(index);
            answers.push(Err(Error::Protocol("not checked".into())));
            continue;
        }
        let reply = redis::from_redis_value::<Vec<i64>>(reply);
        let reply = reply.map_err(|error| crate::redis_error(error.into()));
        answers.push(reply.and_then(|reply| scripts::parse_reply(&reply, policy, cost)));
    }
    let again = elsewhere
        .iter()
        .map(|&index| decide_one(store, keys[index], policy, cost, now));
    let decided = futures_util::future::join_all(again).await;
    for (index, decision) in elsewhere.into_iter().zip(decided) {
        answers[index] = decision;
    }
    Ok(answers)
}

/// Whether a Cluster node refused a call before running any of it.
fn refused_whole(error: &Error) -> bool {
    match error {
        Error::Backend(error) => {
            (error.downcast_ref::<redis::RedisError>()).is_some_and(crate::cluster::did_not_run)
        }
        _ => false,
    }
}

/// Runs `call` (deciding `decisions` requests) within the response
/// timeout as a whole: connecting, loading the script and following
/// redirections included. Past it the call is abandoned (the connection
/// attempt goes on for the next call) and never replayed.
pub(crate) async fn script(
    store: &RedisStore,
    lua: &Lua,
    call: &Cmd,
    decisions: usize,
) -> Result<Vec<i64>, Error> {
    script_until(store, lua, call, decisions, store.deadline()).await
}

/// [`script`](Self::script), answered by `until` or abandoned.
pub(crate) async fn script_until<T: redis::FromRedisValue>(
    store: &RedisStore,
    lua: &Lua,
    call: &Cmd,
    decisions: usize,
    until: Instant,
) -> Result<T, Error> {
    metrics::counter!(CALLS).increment(1);
    metrics::histogram!(BATCH_SIZE).record(decisions as f64);
    store.bounded_call_until(lua, call, until).await
}
