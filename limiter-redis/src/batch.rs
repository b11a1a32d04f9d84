//! The batch scripts: one call decides k requests of one key under one
//! policy, in order, at the same time, with the algorithm's own code: the
//! hash algorithms' one step in a loop over the key's state read once
//! (`scripts/loop_open.lua`), the sliding log's whole script once per
//! request (`scripts/batch.lua`).

use redis::Cmd;

use super::scripts::{self, Lua};
use limiter_core::Decision;
use limiter_core::Error;
use limiter_core::{Algorithm, Policy};

// The sliding log's script as the body of `decide(cost)`, then the loop
// over the costs.
static SLIDING_LOG: Lua =
    scripts::around_decide!([], ["sliding_log.lua"], include_str!("scripts/batch.lua"));
// The hash algorithms' requests decided in one loop over locals, the step
// of their single check its body; the hash read and written once.
static FIXED_WINDOW: Lua =
    scripts::looped!(["helpers.lua"], "fixed_window.lua", "fixed_window_step.lua");
static SLIDING_WINDOW: Lua = scripts::looped!(
    ["helpers.lua"],
    "sliding_window.lua",
    "sliding_window_step.lua"
);
static BUCKET: Lua = scripts::looped!(["helpers.lua"], "meter.lua", "meter_step.lua");

pub(crate) fn lua(algorithm: Algorithm) -> &'static Lua {
    match algorithm {
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => &BUCKET,
    }
}

/// The call of the batch script: the single call's arguments, with the
/// costs (separated by spaces) in place of the cost.
pub(crate) fn evalsha(key: &str, policy: &Policy, costs: &[u64], now: Option<u64>) -> Cmd {
    let mut joined = String::with_capacity(costs.len() * 3);
    for (i, cost) in costs.iter().enumerate() {
        if i > 0 {
            joined.push(' ');
        }
        joined.push_str(&cost.to_string());
    }
    scripts::evalsha_of(lua(policy.algorithm()), key, policy, joined, now)
}

/// Splits the batch reply into one decision per request; every reply of a
/// policy has the same length.
pub(crate) fn parse_reply(
    reply: &[i64],
    policy: &Policy,
    costs: &[u64],
) -> Result<Vec<Decision>, Error> {
    let k = costs.len();
    if k == 0 || reply.is_empty() || !reply.len().is_multiple_of(k) {
        return Err(Error::Protocol(format!("batch reply {reply:?}")));
    }
    reply
        .chunks_exact(reply.len() / k)
        .zip(costs)
        .map(|(one, &cost)| scripts::parse_reply(one, policy, cost))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sliding_logs_batch_wraps_its_script_unchanged() {
        let batch = lua(Algorithm::SlidingLog).source();
        assert_eq!(batch.lines().next(), Some("#!lua"));
        let single = scripts::lua(Algorithm::SlidingLog).source();
        let body = single.lines().last().unwrap();
        assert!(batch.contains(body));
        assert!(batch.contains("local function decide(cost)\n"));
    }

    #[test]
    fn a_looped_batch_decides_with_the_single_checks_step() {
        let meter = include_str!("scripts/meter_step.lua");
        let fixed = include_str!("scripts/fixed_window_step.lua");
        let sliding = include_str!("scripts/sliding_window_step.lua");
        for (algorithm, step) in [
            (Algorithm::TokenBucket, meter),
            (Algorithm::LeakyBucket, meter),
            (Algorithm::Gcra, meter),
            (Algorithm::FixedWindow, fixed),
            (Algorithm::SlidingWindow, sliding),
        ] {
            let batch = lua(algorithm).source();
            assert_eq!(batch.lines().next(), Some("#!lua"), "{algorithm:?}");
            assert_eq!(batch.matches(step).count(), 1, "{algorithm:?}");
            assert_eq!(scripts::lua(algorithm).source().matches(step).count(), 1);
        }
    }
}
