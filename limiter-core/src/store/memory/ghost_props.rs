//! However keys are evicted, merged and inherited, no key gets more than its
//! limit: random traces over many keys, each with one of three policies of
//! one algorithm, through a store with room for 3 keys (and 3 ghost slots),
//! remembering 0, 2 or 12 (the default) evicted keys exactly.
//!
//! For five algorithms every request the small store allows is replayed on a
//! store that never evicts, fed only those requests: each must pass there
//! too (what was let through is a history the algorithm itself allows). A
//! fixed window's phase is part of its state, and a key that inherits a
//! merge has its window restarted (`fixed_window::inherit`), so the replay
//! would place its windows elsewhere; for it the trace is checked against
//! the windows the small store reports: consecutive, none shorter than `W`,
//! none holding more than the limit, a window never ending earlier than it
//! said.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::{Algorithm, ManualClock, Rate, Rule};

const KEYS: usize = 10;
const T0: Duration = Duration::from_secs(1_000);

#[derive(Debug, Clone)]
struct Step {
    advance_ms: u64,
    key: usize,
    cost: u64,
}

/// How many evicted keys the small store remembers exactly: none (every
/// eviction merges), a few (the exact table overflows), the default.
fn remembered() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), Just(2), Just(12)]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let advance = prop_oneof![3 => Just(0u64), 3 => 1..400u64, 1 => 400..3_000u64];
    let step = (advance, 0..KEYS, 1..=2u64).prop_map(|(advance_ms, key, cost)| Step {
        advance_ms,
        key,
        cost,
    });
    prop::collection::vec(step, 1..400)
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn rule(limit: u64, window_ms: u64) -> Rule {
    Rule::new(limit, ms(window_ms)).unwrap()
}

/// Three policies of `algorithm`: key `i` uses the `i % 3`-th.
fn policies(algorithm: Algorithm) -> [Policy; 3] {
    let rates = [
        Rate::per_second(2).unwrap(),
        Rate::per_second(1).unwrap(),
        Rate::new(5, ms(3_000)).unwrap(),
    ];
    let bucket = |build: fn(Rate, u64) -> Result<Policy, crate::ConfigError>| {
        [
            build(rates[0], 3).unwrap(),
            build(rates[1], 2).unwrap(),
            build(rates[2], 4).unwrap(),
        ]
    };
    match algorithm {
        Algorithm::SlidingLog => [
            Policy::sliding_log([rule(3, 1_000)]).unwrap(),
            Policy::sliding_log([rule(2, 500), rule(5, 3_000)]).unwrap(),
            Policy::sliding_log([rule(4, 2_000), rule(2, 200)]).unwrap(),
        ],
        Algorithm::FixedWindow => [
            Policy::fixed_window(rule(3, 1_000)),
            Policy::fixed_window(rule(2, 2_500)),
            Policy::fixed_window(rule(5, 700)),
        ],
        Algorithm::SlidingWindow => [
            Policy::sliding_window(rule(3, 1_000)),
            Policy::sliding_window(rule(4, 1_000)),
            Policy::sliding_window(rule(2, 2_000)),
        ],
        Algorithm::TokenBucket => bucket(Policy::token_bucket),
        Algorithm::LeakyBucket => bucket(Policy::leaky_bucket),
        _ => bucket(Policy::gcra),
    }
}

/// Runs `steps` through the small store; hands each decision to `judge`.
fn run(
    algorithm: Algorithm,
    remembered: usize,
    steps: &[Step],
    mut judge: impl FnMut(&str, &Policy, u64, Decision, u64) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(T0);
    let small = MemoryStore::with_clock_and_shards(clock.clone(), 1)
        .with_capacity(3)
        .remember_evicted(remembered);
    let policies = policies(algorithm);
    for step in steps {
        clock.advance(ms(step.advance_ms));
        let key = format!("key{}", step.key);
        let policy = &policies[step.key % 3];
        let decision = small.check_text(&key, policy, step.cost).unwrap();
        judge(&key, policy, step.cost, decision, clock.now_micros())?;
    }
    Ok(())
}

/// Every allowed request passes on a store that never evicts and sees only
/// the allowed requests.
fn replays(algorithm: Algorithm, remembered: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let referee = MemoryStore::with_clock_and_shards(ManualClock::new(T0), 1);
    run(
        algorithm,
        remembered,
        steps,
        |key, policy, cost, decision, now| {
            if decision.allowed() {
                let replayed = referee
                    .check_at(&Key::from(key), policy, cost, now)
                    .unwrap();
                prop_assert!(replayed.allowed(), "{key} at {now}: {replayed:?}");
            }
            Ok(())
        },
    )
}

/// Per key, the windows the store reports (each decision's reset is its
/// window's end) are consecutive, at least `W` long, and hold at most the
/// limit; a window that is still running may only be extended.
fn windows_hold(remembered: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut windows = std::collections::HashMap::<String, (u64, u64)>::new();
    run(
        Algorithm::FixedWindow,
        remembered,
        steps,
        |key, policy, cost, decision, now| {
            let rule = policy.rules()[0];
            let end = now + decision.reset_after().as_micros() as u64;
            let (window_end, count) = match windows.get(key) {
                Some(&(window_end, count)) if now < window_end => {
                    prop_assert!(end >= window_end, "{key} at {now}: ends earlier");
                    (end, count)
                }
                _ => {
                    prop_assert_eq!(end, now + rule.window_us(), "{} at {}", key, now);
                    (end, 0)
                }
            };
            let count = count + if decision.allowed() { cost } else { 0 };
            prop_assert!(count <= rule.limit(), "{key} at {now}: {count} in a window");
            windows.insert(key.to_owned(), (window_end, count));
            Ok(())
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn evicted_sliding_logs_never_pass_the_limit(remembered in remembered(), steps in steps()) {
        replays(Algorithm::SlidingLog, remembered, &steps)?;
    }

    #[test]
    fn evicted_fixed_windows_never_pass_the_limit(remembered in remembered(), steps in steps()) {
        windows_hold(remembered, &steps)?;
    }

    #[test]
    fn evicted_sliding_windows_never_pass_the_limit(remembered in remembered(), steps in steps()) {
        replays(Algorithm::SlidingWindow, remembered, &steps)?;
    }

    #[test]
    fn evicted_token_buckets_never_pass_the_limit(remembered in remembered(), steps in steps()) {
        replays(Algorithm::TokenBucket, remembered, &steps)?;
    }

    #[test]
    fn evicted_leaky_buckets_never_pass_the_limit(remembered in remembered(), steps in steps()) {
        replays(Algorithm::LeakyBucket, remembered, &steps)?;
    }

    #[test]
    fn evicted_gcra_states_never_pass_the_limit(remembered in remembered(), steps in steps()) {
        replays(Algorithm::Gcra, remembered, &steps)?;
    }
}
