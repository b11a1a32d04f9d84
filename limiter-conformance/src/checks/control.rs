//! Checks 8 and 9: reading a key ahead of its check changes nothing, and a
//! reset key has its whole quota again.

use super::{Keys, T0, Timed, algorithms, decided, fail};
use crate::traces::{self, Rng};
use crate::{Harness, KeyModel, Outcome, Support};
use limiter_core::{Capabilities, Store};

/// Traces per algorithm.
const CASES: u64 = 16;
/// Keys per trace.
const KEYS: usize = 2;

/// When the store can peek ([`KeyState`](limiter_core::KeyState)): on pseudo-random
/// traces of every algorithm the store runs exactly, a peek before each
/// check answers every field the model's check would, and the check that
/// follows answers as if no peek had been made.
///
/// # Panics
/// At the first answer that differs, naming the algorithm, the case, the
/// step, and both outcomes.
pub async fn peek<H: Harness>(harness: &H) {
    const CHECK: &str = "peek";
    let store = Timed::new(harness).await;
    let Some(state) = store.store.as_key_state() else {
        return;
    };
    let keys = Keys::new(CHECK);
    let mut now = T0;
    for (algorithm, _) in algorithms(harness, &[Support::Exact]) {
        for case in 0..CASES {
            let seed = traces::seed(CHECK, algorithm, case);
            let mut rng = Rng::new(seed);
            let params = traces::params(&mut rng, algorithm);
            let policy = params.policy();
            let steps = traces::trace(&mut rng, &params, KEYS);
            now += rng.range(0, 1_000_000_000);
            let mut models = vec![KeyModel::default(); KEYS];
            for (i, step) in steps.iter().enumerate() {
                now += step.advance_us;
                let key = keys.key(algorithm, case, step.key);
                let at =
                    || format!("case {case} (seed {seed:#x}, {params:?}), step {i} ({step:?})");
                let model = &mut models[step.key];
                store.at(now);
                let peeked = state.peek(&key, &policy, step.cost).await;
                let peeked = Outcome::of(&decided(CHECK, algorithm, at(), peeked));
                let expected = model.clone().check(&params, now, step.cost);
                if peeked != expected {
                    fail(
                        CHECK,
                        algorithm,
                        format!("the peek at {}", at()),
                        peeked,
                        expected,
                    );
                }
                let answer = store.at(now).check(&key, &policy, step.cost).await;
                let checked = Outcome::of(&decided(CHECK, algorithm, at(), answer));
                let expected = model.check(&params, now, step.cost);
                if checked != expected {
                    fail(
                        CHECK,
                        algorithm,
                        format!("the check after {}", at()),
                        checked,
                        expected,
                    );
                }
            }
        }
    }
}

/// When the store forgets keys ([`KeyState::reset`](limiter_core::KeyState::reset)): for every
/// algorithm, a key used up to a denial and then reset answers its next
/// request exactly as a key never used does, and a key beside it keeps its
/// state.
///
/// # Panics
/// At the first answer that differs.
pub async fn reset<H: Harness>(harness: &H) {
    const CHECK: &str = "reset";
    let store = Timed::new(harness).await;
    let Some(resets) = store.store.as_key_state() else {
        return;
    };
    let keys = Keys::new(CHECK);
    for (algorithm, _) in algorithms(harness, &[Support::Exact]) {
        for case in 0..CASES {
            let seed = traces::seed(CHECK, algorithm, case);
            let mut rng = Rng::new(seed);
            let params = traces::params(&mut rng, algorithm);
            let policy = params.policy();
            let now = T0 + rng.range(0, 1_000_000_000);
            let (reset, kept) = (keys.key(algorithm, case, 0), keys.key(algorithm, case, 1));
            let at = |what: &str| format!("case {case} (seed {seed:#x}, {params:?}): {what}");
            let mut model = KeyModel::default();
            for key in [&reset, &kept] {
                model = KeyModel::default();
                loop {
                    let answer = store.at(now).check(key, &policy, 1).await;
                    let decision = decided(CHECK, algorithm, at("using the quota"), answer);
                    model.check(&params, now, 1);
                    if !decision.allowed() {
                        break;
                    }
                }
            }
            if let Err(error) = resets.reset(&reset, &policy).await {
                fail(
                    CHECK,
                    algorithm,
                    at("the reset"),
                    Err::<(), _>(error),
                    Ok::<(), limiter_core::Error>(()),
                );
            }
            let answer = store.at(now).check(&reset, &policy, 1).await;
            let answered = Outcome::of(&decided(CHECK, algorithm, at("after the reset"), answer));
            let expected = KeyModel::default().check(&params, now, 1);
            if answered != expected {
                fail(
                    CHECK,
                    algorithm,
                    at("the reset key's next check"),
                    answered,
                    expected,
                );
            }
            let answer = store.at(now).check(&kept, &policy, 1).await;
            let answered = Outcome::of(&decided(CHECK, algorithm, at("beside the reset"), answer));
            let expected = model.check(&params, now, 1);
            if answered != expected {
                fail(
                    CHECK,
                    algorithm,
                    at("the key beside it"),
                    answered,
                    expected,
                );
            }
        }
    }
}

/// When the store counts penalties ([`SharedControl::penalize`](limiter_core::SharedControl::penalize)): on
/// pseudo-random sequences of denials (several at one instant, some within
/// a period, some long after), the store answers each the block the model
/// ([`PenaltyState`](limiter_core::PenaltyState)) earns, for penalties of one and
/// of several steps.
///
/// # Panics
/// At the first answer that differs.
pub async fn penalties<H: Harness>(harness: &H) {
    use std::time::Duration;
    const CHECK: &str = "penalties";
    let store = Timed::new(harness).await;
    let Some(shared) = store.store.as_shared_control() else {
        return;
    };
    let keys = Keys::new(CHECK);
    let s = Duration::from_secs;
    let cases = [
        limiter_core::Penalty::new(3, s(600), [s(900), s(3_600)]),
        limiter_core::Penalty::new(1, s(5), [s(1), s(2), s(3)]),
        limiter_core::Penalty::new(4, Duration::from_millis(1), [s(10)]),
    ];
    for (case, penalty) in cases.into_iter().enumerate() {
        let penalty = penalty.expect("a valid penalty");
        let key = keys.key(limiter_core::Algorithm::SlidingLog, case as u64, 0);
        let mut rng = Rng::new(traces::seed(
            CHECK,
            limiter_core::Algorithm::SlidingLog,
            case as u64,
        ));
        let mut model = limiter_core::PenaltyState::default();
        let mut now = T0;
        for step in 0..200 {
            now += [0, 1, 1_000, 300_000_000, 1_000_000_000][rng.range(0, 4) as usize]
                + rng.range(0, 999);
            store.at(now);
            let answered = match shared.penalize(key.as_str(), &penalty, key.as_str()).await {
                Ok(block) => block,
                Err(error) => fail(
                    CHECK,
                    limiter_core::Algorithm::SlidingLog,
                    format!("case {case} step {step}"),
                    Err::<(), _>(error),
                    Ok::<(), limiter_core::Error>(()),
                ),
            };
            let expected = model.record(&penalty, now);
            if answered != expected {
                fail(
                    CHECK,
                    limiter_core::Algorithm::SlidingLog,
                    format!("case {case} ({penalty:?}) step {step} at {now}"),
                    answered,
                    expected,
                );
            }
        }
    }
}
