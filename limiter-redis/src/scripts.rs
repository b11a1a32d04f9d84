//! The Lua scripts, and how a check becomes an EVALSHA.
//!
//! # Layout of `scripts/`
//! A script is whole files joined (`scripts/sources.rs` names them): the
//! `#!lua` shebang, then
//! - `prelude.lua`: the time and the cost, read from the arguments, and
//!   `db`, through which the algorithms and the helpers reach Redis;
//! - `helpers.lua` (all but the sliding log's): whole-number division,
//!   integers as text, a TTL, reading a state's hash;
//! - the algorithm's file, which defines functions and runs nothing:
//!   `fixed_window.lua`, `sliding_window.lua` and `meter.lua` (the token
//!   and leaky buckets and GCRA), the hash algorithms, each keep their
//!   state in the file's locals and define `read_state`, `step` (one
//!   request), `answer` and `write_state`, from which `hash_decide.lua`
//!   makes `decide`; `sliding_log.lua` defines its own
//!   `decide` and the steps it takes;
//! - a driver, last, which runs them: `single.lua` (a check),
//!   `receipted.lua` (a check that answers its time, `refund.rs`),
//!   `peek.lua` (a check without its writes, every call of Redis through a
//!   guard that lets only reads of the given keys through),
//!   `hash_batch.lua` and `sliding_log_batch.lua` (coalesced checks,
//!   `batch.rs`), `keys.lua` and `sliding_log_keys.lua` (checks of several
//!   keys of one node, `node_batch.rs`, whose shebang lets them reach keys
//!   of several slots of a Cluster's node).
//!
//! No file opens a block another closes, nor uses another's locals but
//! those it defines at its top level: each compiles on its own.
//! The other scripts (`concurrency.lua`, `lease.lua`, `refund.lua`,
//! `penalty.lua`, and those of blocks, plans and notices) are one file
//! each, after the prelude, helpers and `reads.lua` when they use them.
//!
//! Redis runs a script's whole text on every call: each function a file
//! defines is made anew, with each of the file's locals it keeps, and each
//! table, on every call, checks included. So a script includes only the
//! files it calls, a hash algorithm's state lives in its file's locals, and
//! the sliding log passes what it learns as arguments and answers.

use redis::Cmd;

pub(crate) use super::lua::Lua;
use limiter_core::ConcurrencyLimit;
use limiter_core::Error;
use limiter_core::backend::sliding_log;
use limiter_core::{Algorithm, Policy, backend::Kind};
use limiter_core::{Decision, MAX_RULES, RuleStatus};

pub(crate) mod sources;

use sources::{
    ASSIGN, BLOCK, BLOCKS, BUMP, CONCURRENCY, LEASE, OVERRIDE, OVERRIDES, PENALTY, PUBLISH, REFUND,
    REPORT, REPORTS, RESET, UNBLOCK,
};
#[cfg(any(test, feature = "test-util"))]
pub(crate) use sources::{FILES, all};

// Every script that writes starts with the shebang `#!lua` and declares no
// flag (the one that only reads, `reports.lua`, declares `no-writes`, so
// the instances' reports stay readable while Redis is over `maxmemory`). Redis
// (7.0 and later) checks a script that declares itself so before running
// any of it, and the flags left out are what make the store safe:
// - without `allow-oom`, the whole script is refused with `OOM` while Redis
//   is over `maxmemory`. A script without a shebang is refused only when its
//   first write would grow memory, and the sliding log's first write (a
//   trim) never does, so it went on adding entries past the limit;
// - without `no-writes`, a replica refuses it with `READONLY` before it
//   runs: that answer proves nothing executed, so the call may be sent
//   again to the primary found anew.
// Shebang scripts must declare the keys they touch; ours touch `KEYS[1]`.

/// Publishes an instance's report on a board (`report.lua`).
pub(crate) fn report() -> &'static Lua {
    &REPORT
}

/// Reads a board's live reports (`reports.lua`).
pub(crate) fn reports() -> &'static Lua {
    &REPORTS
}

/// `PUBLISH` on the channel given as its key (routed to the node serving
/// the channel's slot in a Cluster) of `ARGV[1]`.
pub(crate) fn publish() -> &'static Lua {
    &PUBLISH
}

/// Blocks `ARGV[1]` for `ARGV[2]` µs, of origin `ARGV[3]` (`o` or `p`),
/// at most `ARGV[4]` of that origin kept: keys the operators' hash and the
/// penalties' sorted set, and for an operator's block the version hash,
/// which counts the change ([`versioned`]). Answers `{ 0 }` when an
/// operator block is refused.
pub(crate) fn block() -> &'static Lua {
    &BLOCK
}

/// Lifts `ARGV[1]`'s blocks (keys as [`block`]'s, the version hash
/// counting the change).
pub(crate) fn unblock() -> &'static Lua {
    &UNBLOCK
}

/// The live blocks, `key, µs left, origin` flat (keys as [`block`]'s); the
/// ended ones deleted, and the penalty blocks past `ARGV[1]`.
pub(crate) fn blocks() -> &'static Lua {
    &BLOCKS
}

/// A denial counted by a penalty (`penalty.lua`).
pub(crate) fn penalty() -> &'static Lua {
    &PENALTY
}

/// Gives `ARGV[1]` the plan `ARGV[2]` in the plans' hash (its first key);
/// counts the change like [`block`].
pub(crate) fn assign() -> &'static Lua {
    &ASSIGN
}

/// Puts an override on `ARGV[1]` for `ARGV[2]` µs (0: ends it), its text
/// `ARGV[3]`, at most `ARGV[4]` limits holding one: keys the overrides'
/// hash and the version hash, which counts the change. Answers `{ 0 }`
/// when refused.
pub(crate) fn set_override() -> &'static Lua {
    &OVERRIDE
}

/// The live overrides, `limit, µs left, text` flat (its key the overrides'
/// hash); the ended ones deleted.
pub(crate) fn overrides() -> &'static Lua {
    &OVERRIDES
}

/// Counts one more change of the kind `ARGV[1]` in the version hash (its
/// key): `HINCRBY`.
pub(crate) fn bump() -> &'static Lua {
    &BUMP
}

/// `EVALSHA {sha} 2 {hash} {version}`: a call of the block, unblock or
/// assign script that also counts the change in the version hash
/// `version` (in `hash`'s slot), in the same step.
pub(crate) fn versioned(lua: &Lua, hash: &str, version: &str) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(lua.hash()).arg(2).arg(hash).arg(version);
    cmd
}

/// The reset script: `DEL` of its key.
pub(crate) fn reset() -> &'static Lua {
    &RESET
}

/// The leases' script (`lease.rs`).
pub(crate) fn lease() -> &'static Lua {
    &LEASE
}

/// The refund of a check counted by outcome (`refund.rs`).
pub(crate) fn refund() -> &'static Lua {
    &REFUND
}

/// The check of `algorithm`.
pub(crate) fn lua(algorithm: Algorithm) -> &'static Lua {
    sources::single(algorithm)
}

/// `EVALSHA {sha} 1 {key} {now} {cost} {parameters...}`; `now` is empty
/// unless a test gives the time.
pub(crate) fn evalsha(key: &str, policy: &Policy, cost: u64, now: Option<u64>) -> Cmd {
    evalsha_of(lua(policy.algorithm()), key, policy, cost, now)
}

/// [`evalsha`] of `lua`, a script that takes the same arguments (`cost`
/// may be another value in its place, such as a batch's costs).
pub(crate) fn evalsha_of(
    lua: &Lua,
    key: &str,
    policy: &Policy,
    cost: impl redis::ToRedisArgs,
    now: Option<u64>,
) -> Cmd {
    with_arguments(lua.call(key), policy, cost, now)
}

/// `EVALSHA {sha} 0 {now} {cost} {parameters...} {keys...} {n} {on a
/// Cluster}`: a call of `lua` checking each of `keys` (`sources::keys`).
pub(crate) fn evalsha_keys(
    lua: &Lua,
    keys: &[&str],
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
    on_cluster: bool,
) -> Cmd {
    let mut cmd = with_arguments(lua.call_undeclared(), policy, cost, now);
    cmd.arg(keys)
        .arg(keys.len())
        .arg(if on_cluster { "1" } else { "" });
    cmd
}

/// `cmd` followed by a check's arguments: the time, the cost, the policy's
/// parameters.
fn with_arguments(
    mut cmd: Cmd,
    policy: &Policy,
    cost: impl redis::ToRedisArgs,
    now: Option<u64>,
) -> Cmd {
    match now {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    cmd.arg(cost);
    match policy.kind() {
        Kind::SlidingLog => {
            // The key lives as long as the longest window (ms, rounded up);
            // with a test's timestamp Redis's clock does not follow that
            // time, so a minute more (the TTL only collects garbage).
            let longest = sliding_log::longest_window_us(policy.rules());
            let padding = if now.is_some() { 60_000_000 } else { 0 };
            let ttl_ms = (longest + padding).div_ceil(1000).max(1);
            cmd.arg(ttl_ms).arg(longest).arg(policy.rules().len());
            for rule in policy.rules() {
                cmd.arg(rule.limit()).arg(rule.window_us());
            }
        }
        Kind::FixedWindow | Kind::SlidingWindow => {
            let rule = policy.rules()[0];
            cmd.arg(rule.limit()).arg(rule.window_us());
        }
        Kind::TokenBucket(b) => {
            cmd.arg(b.unit).arg(b.drain).arg(b.capacity).arg(0);
        }
        Kind::LeakyBucket(b) => {
            cmd.arg(b.unit).arg(b.drain).arg(b.capacity).arg(1);
        }
        Kind::Gcra(b) => {
            cmd.arg(b.unit).arg(b.drain).arg(b.capacity).arg("g");
        }
    }
    cmd
}

/// What a call of the concurrency script does to a permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermitOp {
    Acquire,
    Renew,
    Release,
}

/// The concurrency limit's script.
pub(crate) fn concurrency() -> &'static Lua {
    &CONCURRENCY
}

/// `EVALSHA {sha} 1 {key} {now} 1 {operation} {id} {max} {lease}`; `now` is
/// empty unless a test gives the time.
pub(crate) fn permit_call(
    key: &str,
    op: PermitOp,
    id: &str,
    limit: &ConcurrencyLimit,
    now: Option<u64>,
) -> Cmd {
    let mut cmd = CONCURRENCY.call(key);
    match now {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    let op = match op {
        PermitOp::Acquire => "a",
        PermitOp::Renew => "n",
        PermitOp::Release => "r",
    };
    cmd.arg(1)
        .arg(op)
        .arg(id)
        .arg(limit.max())
        .arg(limit.lease_us());
    cmd
}

/// Turns a script's reply into a decision.
pub(crate) fn parse_reply(reply: &[i64], policy: &Policy, cost: u64) -> Result<Decision, Error> {
    let malformed = || Error::Protocol(format!("script reply {reply:?}"));
    let rules = policy.rules();
    if policy.algorithm() == Algorithm::SlidingLog {
        // See `sliding_log.lua`: the counts, from which the statuses follow
        // as in the memory store.
        let [retry_after, decided_by, newest_from_now, per_rule @ ..] = reply else {
            return Err(malformed());
        };
        let n = rules.len();
        if per_rule.len() != 2 * n || !(0..n as i64).contains(decided_by) {
            return Err(malformed());
        }
        let (mut counted, mut available) = ([0u64; MAX_RULES], [0u64; MAX_RULES]);
        for (to, value) in counted[..n]
            .iter_mut()
            .chain(&mut available[..n])
            .zip(per_rule)
        {
            *to = u64::try_from(*value).map_err(|_| malformed())?;
        }
        let denied = u64::try_from(*retry_after)
            .ok()
            .map(|wait| (wait, *decided_by as usize));
        return Ok(sliding_log::decide(
            rules,
            &counted[..n],
            &available[..n],
            denied,
            Some(*newest_from_now),
            cost,
        ));
    }
    // The other scripts (see `hash_decide.lua`): the statuses themselves.
    let [
        allowed,
        decided_by,
        retry_after,
        delay,
        reset_after,
        count,
        per_rule @ ..,
    ] = reply
    else {
        return Err(malformed());
    };
    if *count as usize != rules.len()
        || per_rule.len() != 2 * rules.len()
        || !(0..rules.len() as i64).contains(decided_by)
        || (*allowed == 1) != (*retry_after < 0)
    {
        return Err(malformed());
    }
    let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
    for (status, pair) in statuses.iter_mut().zip(per_rule.chunks_exact(2)) {
        *status = RuleStatus::new(
            u64::try_from(pair[0]).map_err(|_| malformed())?,
            u64::try_from(pair[1]).map_err(|_| malformed())?,
        );
    }
    Ok(Decision::new(
        rules,
        &statuses[..rules.len()],
        *decided_by as usize,
        u64::try_from(*retry_after).ok(),
        u64::try_from(*delay).map_err(|_| malformed())?,
        u64::try_from(*reset_after).map_err(|_| malformed())?,
    ))
}
