//! The Lua scripts, one per algorithm, and how a check becomes an EVALSHA.

use std::sync::LazyLock;

use redis::{Cmd, Script};

use crate::decision::{Decision, MAX_RULES, RuleStatus};
use crate::error::Error;
use crate::policy::{Algorithm, Kind, Policy};

/// One algorithm's script: the prelude followed by the algorithm's file,
/// hashed once (for EVALSHA) on first use.
pub(crate) struct Lua {
    pub(crate) source: &'static str,
    script: LazyLock<Script>,
}

impl Lua {
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// `SCRIPT LOAD`, for a server that answered NOSCRIPT.
    pub(crate) fn load_command(&self) -> Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.source);
        cmd
    }
}

macro_rules! lua {
    ($file:literal) => {{
        const SOURCE: &str = concat!(
            include_str!("scripts/prelude.lua"),
            include_str!(concat!("scripts/", $file))
        );
        Lua {
            source: SOURCE,
            script: LazyLock::new(|| Script::new(SOURCE)),
        }
    }};
}

static SLIDING_LOG: Lua = lua!("sliding_log.lua");
static FIXED_WINDOW: Lua = lua!("fixed_window.lua");
static SLIDING_WINDOW: Lua = lua!("sliding_window.lua");
static BUCKET: Lua = lua!("bucket.lua");
static GCRA: Lua = lua!("gcra.lua");

pub(crate) fn lua(algorithm: Algorithm) -> &'static Lua {
    match algorithm {
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::TokenBucket | Algorithm::LeakyBucket => &BUCKET,
        Algorithm::Gcra => &GCRA,
    }
}

/// `EVALSHA {sha} 1 {key} {now} {cost} {parameters...}`; `now` is empty
/// unless a test gives the time.
pub(crate) fn evalsha(key: &str, policy: &Policy, cost: u64, now: Option<u64>) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(lua(policy.algorithm()).hash()).arg(1).arg(key);
    match now {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    cmd.arg(cost);
    match policy.kind() {
        Kind::SlidingLog => {
            cmd.arg(policy.rules().len());
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
        Kind::Gcra(g) => {
            cmd.arg(g.interval_us).arg(g.tolerance_us);
        }
    }
    cmd
}

/// Turns a script's reply (see `prelude.lua`) into a decision.
pub(crate) fn parse_reply(reply: &[i64], policy: &Policy) -> Result<Decision, Error> {
    let malformed = || Error::Protocol(format!("script reply {reply:?}"));
    let rules = policy.rules();
    let [
        allowed,
        decided_by,
        retry_after,
        delay,
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
        *status = RuleStatus {
            remaining: u64::try_from(pair[0]).map_err(|_| malformed())?,
            reset_after_us: u64::try_from(pair[1]).map_err(|_| malformed())?,
        };
    }
    Ok(Decision::new(
        rules,
        &statuses[..rules.len()],
        *decided_by as usize,
        u64::try_from(*retry_after).ok(),
        u64::try_from(*delay).map_err(|_| malformed())?,
    ))
}
