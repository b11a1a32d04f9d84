//! The batch scripts: one call decides k requests of one key under one
//! policy, in order, at the same time, with the algorithm's own code: the
//! hash algorithms' `step` in a loop over the key's state read once
//! (`scripts/hash_batch.lua`), the sliding log's `decide` for the first
//! request and, on what the log then holds, a loop for the others
//! (`scripts/sliding_log_batch.lua`).
//!
//! A hash algorithm's batch answers only the state it read, the state it
//! wrote and its time, and the requests' decisions are worked out here by
//! replaying the batch on the state read with limiter-core's step, the
//! very arithmetic the script's step restates (the conformance suite holds
//! the two equal, decision by decision). So Redis spends well under a
//! microsecond a request: no reply of 8 integers for each. The replay must
//! come to the state Redis wrote, or the call fails as a protocol error.

use std::fmt::Write as _;

use redis::Cmd;

use super::scripts::{self, Lua};
use limiter_core::Decision;
use limiter_core::Error;
use limiter_core::backend::fixed_window::{self, Window};
use limiter_core::backend::meter::{self, Level, Pacing};
use limiter_core::backend::sliding_window::{self, Counters};
use limiter_core::backend::{Kind, Micros};
use limiter_core::{Algorithm, Policy};

pub(crate) fn lua(algorithm: Algorithm) -> &'static Lua {
    scripts::sources::batch(algorithm)
}

/// The call of the batch script: the single call's arguments, with the
/// costs in runs (`{cost}x{times}`, separated by spaces) in place of the
/// cost: a hot key's batch of equal costs is one run, which the script
/// reads once.
pub(crate) fn evalsha(key: &str, policy: &Policy, costs: &[u64], now: Option<u64>) -> Cmd {
    scripts::evalsha_of(lua(policy.algorithm()), key, policy, runs(costs), now)
}

fn runs(costs: &[u64]) -> String {
    let mut text = String::with_capacity(8);
    for run in costs.chunk_by(|a, b| a == b) {
        if !text.is_empty() {
            text.push(' ');
        }
        let _ = write!(text, "{}x{}", run[0], run.len());
    }
    text
}

/// The decisions of a batch's requests, from its reply.
pub(crate) fn parse_reply(
    reply: &[i64],
    policy: &Policy,
    costs: &[u64],
) -> Result<Vec<Decision>, Error> {
    let quota = &policy.rules()[0];
    match policy.kind() {
        Kind::SlidingLog => split(reply, policy, costs),
        Kind::FixedWindow => replay(reply, costs, window, |state, now, cost| {
            fixed_window::check(state, quota, now, cost)
        }),
        Kind::SlidingWindow => replay(reply, costs, counters, |state, now, cost| {
            sliding_window::check(state, quota, now, cost)
        }),
        Kind::TokenBucket(params) | Kind::Gcra(params) => {
            replay(reply, costs, level, |state, now, cost| {
                meter::check(state, params, quota, now, cost, Pacing::Off)
            })
        }
        Kind::LeakyBucket(params) => replay(reply, costs, level, |state, now, cost| {
            meter::check(state, params, quota, now, cost, Pacing::On)
        }),
    }
}

/// The sliding log's reply: the requests' replies (each as a single
/// check's, `3 + 2n` integers for `n` rules) in runs, how many requests in
/// a row got it before each.
fn split(reply: &[i64], policy: &Policy, costs: &[u64]) -> Result<Vec<Decision>, Error> {
    let malformed = || Error::Protocol(format!("batch reply {reply:?}"));
    let width = 3 + 2 * policy.rules().len();
    if !reply.len().is_multiple_of(width + 1) {
        return Err(malformed());
    }
    let mut decisions = Vec::with_capacity(costs.len());
    let mut costs = costs.iter();
    for run in reply.chunks_exact(width + 1) {
        let times = usize::try_from(run[0])
            .ok()
            .filter(|&times| times > 0)
            .ok_or_else(malformed)?;
        for _ in 0..times {
            let cost = costs.next().ok_or_else(malformed)?;
            decisions.push(scripts::parse_reply(&run[1..], policy, *cost)?);
        }
    }
    if costs.next().is_some() {
        return Err(malformed());
    }
    Ok(decisions)
}

/// A hash algorithm's reply, `now`, the state read, the state written
/// (each `N` fields, -1 for none): the requests decided by `check` in turn
/// on the state read, which must come to the state written.
fn replay<S: PartialEq + std::fmt::Debug, const N: usize>(
    reply: &[i64],
    costs: &[u64],
    state_of: fn([u64; N]) -> S,
    mut check: impl FnMut(&mut Option<S>, Micros, u64) -> Decision,
) -> Result<Vec<Decision>, Error> {
    let malformed = || Error::Protocol(format!("batch reply {reply:?}"));
    let Some((now, fields)) = reply.split_first().filter(|(_, f)| f.len() == 2 * N) else {
        return Err(malformed());
    };
    let now = u64::try_from(*now).map_err(|_| malformed())?;
    let stored = |fields: &[i64]| -> Result<Option<S>, Error> {
        if fields[0] == -1 {
            return Ok(None);
        }
        let mut values = [0; N];
        for (value, field) in values.iter_mut().zip(fields) {
            *value = u64::try_from(*field).map_err(|_| malformed())?;
        }
        Ok(Some(state_of(values)))
    };
    let (read, written) = fields.split_at(N);
    let (mut state, written) = (stored(read)?, stored(written)?);
    let decisions = costs
        .iter()
        .map(|&cost| check(&mut state, now, cost))
        .collect();
    if state != written {
        return Err(Error::Protocol(format!(
            "a batch replayed at {now} came to {state:?}; Redis wrote {written:?}"
        )));
    }
    Ok(decisions)
}

fn level([level, updated, unit]: [u64; 3]) -> Level {
    Level {
        level,
        updated,
        unit,
    }
}

fn window([count, start]: [u64; 2]) -> Window {
    Window { count, start }
}

fn counters([previous, current, start]: [u64; 3]) -> Counters {
    Counters {
        previous,
        current,
        start,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn costs_go_in_runs_of_equal_costs_in_order() {
        assert_eq!(runs(&[1; 32]), "1x32");
        assert_eq!(runs(&[1, 1, 5, 1, 2, 2]), "1x2 5x1 1x1 2x2");
        assert_eq!(runs(&[7]), "7x1");
    }

    fn bucket() -> Policy {
        let rate = limiter_core::Rate::per_second(1).unwrap();
        Policy::token_bucket(rate, 3).unwrap()
    }

    #[test]
    fn a_batch_is_replayed_on_the_state_read() {
        let policy = bucket();
        let Kind::TokenBucket(params) = policy.kind() else {
            unreachable!()
        };
        let now = 1_000_000_000;
        // Empty as read; after 3 tokens of 4 requests, 3 tokens of water.
        let full = (3 * params.unit) as i64;
        let unit = params.unit as i64;
        let reply = [now as i64, -1, -1, unit, full, now as i64, unit];
        let decisions = parse_reply(&reply, &policy, &[1; 4]).unwrap();
        let allowed: Vec<bool> = decisions.iter().map(Decision::allowed).collect();
        assert_eq!(allowed, [true, true, true, false]);
        let remaining: Vec<u64> = decisions.iter().map(Decision::remaining).collect();
        assert_eq!(remaining, [2, 1, 0, 0]);
        assert_eq!(decisions[3].retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_replay_that_does_not_come_to_the_state_written_is_an_error() {
        let policy = bucket();
        let Kind::TokenBucket(params) = policy.kind() else {
            unreachable!()
        };
        let (now, unit) = (1_000_000_000_i64, params.unit as i64);
        // Redis wrote one token where the replay of two requests finds two.
        let reply = [now, -1, -1, unit, unit, now, unit];
        let error = parse_reply(&reply, &policy, &[1, 1]).unwrap_err();
        assert!(matches!(error, Error::Protocol(_)), "{error:?}");
        // Nothing written where the replay allowed a request.
        let reply = [now, -1, -1, unit, -1, -1, unit];
        assert!(matches!(
            parse_reply(&reply, &policy, &[1]),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn a_malformed_batch_reply_is_an_error() {
        let policy = bucket();
        for reply in [
            &[][..],
            &[5],
            &[5, -1, -1, 1, -1, -1],
            &[-2, -1, -1, 1, -1, -1, 1],
        ] {
            assert!(
                matches!(parse_reply(reply, &policy, &[1]), Err(Error::Protocol(_))),
                "{reply:?}"
            );
        }
        // A negative field other than "none".
        let reply = [5, 3, -7, 1, 3, -7, 1];
        assert!(matches!(
            parse_reply(&reply, &policy, &[1]),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn the_sliding_logs_replies_come_in_runs() {
        let second = Duration::from_secs(1);
        let rule = limiter_core::Rule::new(2, second).unwrap();
        let policy = Policy::sliding_log([rule]).unwrap();
        // Allowed with none before; allowed with one; then three denied
        // alike, waiting 0.5 s for the oldest entry.
        let reply = [
            1, -1, 0, 0, 0, 1_000_000, //
            1, -1, 0, 0, 1, 1_000_000, //
            3, 500_000, 0, 0, 2, 500_000,
        ];
        let decisions = parse_reply(&reply, &policy, &[1; 5]).unwrap();
        let allowed: Vec<bool> = decisions.iter().map(Decision::allowed).collect();
        assert_eq!(allowed, [true, true, false, false, false]);
        let waits: Vec<_> = decisions.iter().map(Decision::retry_after).collect();
        let half = Some(second / 2);
        assert_eq!(waits, [None, None, half, half, half]);
        // Runs that do not add up to the requests, or cut short.
        for costs in [&[1; 4][..], &[1; 6]] {
            assert!(matches!(
                parse_reply(&reply, &policy, costs),
                Err(Error::Protocol(_))
            ));
        }
        assert!(matches!(
            parse_reply(&reply[..17], &policy, &[1; 5]),
            Err(Error::Protocol(_))
        ));
        for times in [-1, 0] {
            let run = [times, -1, 0, 0, 0, 1_000_000, 1, -1, 0, 0, 0, 1_000_000];
            assert!(matches!(
                parse_reply(&run, &policy, &[1]),
                Err(Error::Protocol(_))
            ));
        }
    }
}
