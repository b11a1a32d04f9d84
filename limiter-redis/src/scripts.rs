//! The Lua scripts, one per algorithm, and how a check becomes an EVALSHA.

use redis::Cmd;

pub(crate) use super::lua::Lua;
use limiter_core::ConcurrencyLimit;
use limiter_core::Error;
use limiter_core::backend::sliding_log;
use limiter_core::{Algorithm, Policy, backend::Kind};
use limiter_core::{Decision, MAX_RULES, RuleStatus};

// Every script starts with the shebang `#!lua` and declares no flag. Redis
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
macro_rules! lua {
    ($($file:literal),+) => {{
        const SOURCE: &str = concat!(
            "#!lua\n",
            include_str!("scripts/prelude.lua"),
            $(include_str!(concat!("scripts/", $file))),+
        );
        Lua::new(&[SOURCE])
    }};
}

/// The shebang, the prelude and `helpers`, then the algorithm's files
/// `body` as the body of `decide(cost)`, then `tail`, which calls it: a
/// script around the algorithm's own code, which it cannot drift from (a
/// batch, a check that answers its time).
macro_rules! around_decide {
    ([$($helper:literal),*], [$($body:literal),+], $($tail:tt)+) => {
        Lua::new(&[concat!(
            "#!lua\n",
            include_str!("scripts/prelude.lua"),
            $(include_str!(concat!("scripts/", $helper)),)*
            "local function decide(cost)\n",
            $(include_str!(concat!("scripts/", $body)),)+
            "\nend\n",
            $($tail)+
        )])
    };
}
pub(crate) use around_decide;

/// The shebang, the prelude and `helpers`, the algorithm's file that reads
/// its state, then its step as the body of a loop over a batch's costs
/// (`loop_open.lua`, `loop_close.lua`): the batch of an algorithm whose
/// single check is the same step (`single.lua`).
macro_rules! looped {
    ([$($helper:literal),*], $read:literal, $step:literal) => {
        Lua::new(&[concat!(
            "#!lua\n",
            include_str!("scripts/prelude.lua"),
            $(include_str!(concat!("scripts/", $helper)),)*
            include_str!(concat!("scripts/", $read)),
            include_str!("scripts/loop_open.lua"),
            include_str!(concat!("scripts/", $step)),
            include_str!("scripts/loop_close.lua"),
        )])
    };
}
pub(crate) use looped;

static SLIDING_LOG: Lua = lua!("sliding_log.lua");
static FIXED_WINDOW: Lua = lua!(
    "helpers.lua",
    "fixed_window.lua",
    "fixed_window_step.lua",
    "fixed_window_answer.lua",
    "single.lua"
);
static SLIDING_WINDOW: Lua = lua!(
    "helpers.lua",
    "sliding_window.lua",
    "sliding_window_step.lua",
    "sliding_window_answer.lua",
    "single.lua"
);
static BUCKET: Lua = lua!(
    "helpers.lua",
    "meter.lua",
    "meter_step.lua",
    "meter_answer.lua",
    "single.lua"
);
static CONCURRENCY: Lua = lua!("helpers.lua", "concurrency.lua");
static LEASE: Lua = lua!("helpers.lua", "lease.lua");

// Peeks: the algorithm's own script after `peek.lua`, which shadows its
// writes, so a peek cannot drift from the check it reads ahead of.
static PEEK_SLIDING_LOG: Lua = lua!("peek.lua", "sliding_log.lua");
static PEEK_FIXED_WINDOW: Lua = lua!(
    "peek.lua",
    "helpers.lua",
    "fixed_window.lua",
    "fixed_window_step.lua",
    "fixed_window_answer.lua",
    "single.lua"
);
static PEEK_SLIDING_WINDOW: Lua = lua!(
    "peek.lua",
    "helpers.lua",
    "sliding_window.lua",
    "sliding_window_step.lua",
    "sliding_window_answer.lua",
    "single.lua"
);
static PEEK_BUCKET: Lua = lua!(
    "peek.lua",
    "helpers.lua",
    "meter.lua",
    "meter_step.lua",
    "meter_answer.lua",
    "single.lua"
);
static RESET: Lua = Lua::new(&["#!lua\n", include_str!("scripts/reset.lua")]);

/// The peek script of `algorithm`: its arguments and reply are its check's.
pub(crate) fn peek(algorithm: Algorithm) -> &'static Lua {
    match algorithm {
        Algorithm::SlidingLog => &PEEK_SLIDING_LOG,
        Algorithm::FixedWindow => &PEEK_FIXED_WINDOW,
        Algorithm::SlidingWindow => &PEEK_SLIDING_WINDOW,
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => &PEEK_BUCKET,
    }
}

static PUBLISH: Lua = Lua::new(&["#!lua\n", include_str!("scripts/publish.lua")]);

/// `PUBLISH` on the channel given as its key (routed to the node serving
/// the channel's slot in a Cluster) of `ARGV[1]`.
pub(crate) fn publish() -> &'static Lua {
    &PUBLISH
}

static BLOCK: Lua = Lua::new(&["#!lua\n", include_str!("scripts/block.lua")]);
static UNBLOCK: Lua = Lua::new(&["#!lua\n", include_str!("scripts/unblock.lua")]);
static BLOCKS: Lua = Lua::new(&["#!lua\n", include_str!("scripts/blocks.lua")]);

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

static PENALTY: Lua = Lua::new(&["#!lua\n", include_str!("scripts/penalty.lua")]);

/// A denial counted by a penalty (`penalty.lua`).
pub(crate) fn penalty() -> &'static Lua {
    &PENALTY
}

static ASSIGN: Lua = Lua::new(&["#!lua\n", include_str!("scripts/assign.lua")]);

/// Gives `ARGV[1]` the plan `ARGV[2]` in the plans' hash (its first key);
/// counts the change like [`block`].
pub(crate) fn assign() -> &'static Lua {
    &ASSIGN
}

static BUMP: Lua = Lua::new(&["#!lua\n", include_str!("scripts/bump.lua")]);

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

pub(crate) fn lua(algorithm: Algorithm) -> &'static Lua {
    match algorithm {
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => &BUCKET,
    }
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
    let mut cmd = lua.call(key);
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
    // The other scripts (see `helpers.lua`): the statuses themselves.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_starts_with_a_shebang_without_flags() {
        for algorithm in Algorithm::ALL {
            let first_line = lua(algorithm).source().lines().next();
            assert_eq!(first_line, Some("#!lua"), "{algorithm:?}");
        }
        assert_eq!(concurrency().source().lines().next(), Some("#!lua"));
    }
}
