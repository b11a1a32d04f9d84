//! Checks 3 and 4, at the suite's times (a store on the suite's clock): a key's
//! quota back once its state has expired, and what costs consume.

use super::{Keys, T0, Timed, algorithms, decided, fail};
use crate::traces::{self, Rng, lasting};
use crate::{Harness, KeyModel, Outcome, Params, Support};
use limiter_core::{Algorithm, Decision, Error, Store};

/// Policies per algorithm: one that holds its quota for a day, then
/// pseudo-random ones.
const CASES: u64 = 16;
/// Requests at most to fill a key.
const MOST: usize = 1_000;

/// A key filled until a request is denied (requests of cost 1, mostly at
/// one instant, some a little apart) has its whole quota again once its
/// state has expired: [`Params::clear_after_us`] after its last admitted
/// request (the longest window; two for the sliding window counter; a
/// full bucket's drain). Then a request of the largest cost passes and
/// every rule has its limit less that cost remaining. For each algorithm
/// the store runs, on a day-long policy and pseudo-random ones; where the
/// store runs the algorithm as defined, every decision is also compared
/// with the model's.
///
/// # Panics
/// When the key never fills, its quota is not whole again, or a decision
/// differs from the model's.
pub async fn expiry<H: Harness>(harness: &H) {
    const CHECK: &str = "expiry";
    let store = Timed::new(harness).await;
    let keys = Keys::new(CHECK);
    let mut now = T0;
    for (algorithm, support) in algorithms(harness, &[Support::Exact, Support::LimitOnly]) {
        for case in 0..CASES {
            let (seed, mut rng, params) = case_of(CHECK, algorithm, case);
            let policy = params.policy();
            let key = keys.key(algorithm, case, 0);
            let mut model = KeyModel::default();
            let at = |what: &str| format!("case {case} (seed {seed:#x}, {params:?}), {what}");
            now += rng.range(0, 1_000_000_000);
            let mut last_admitted = None;
            for i in 0..=MOST {
                if i == MOST {
                    fail(CHECK, algorithm, at("filling"), "never denied", "a denial");
                }
                if rng.one_in(3) {
                    now += rng.range(0, params.span_us() / 64);
                }
                let answer = store.at(now).check(&key, &policy, 1).await;
                let decision = decided(CHECK, algorithm, at(&format!("request {i}")), answer);
                let expected = model.check(&params, now, 1);
                if support == Support::Exact {
                    let at = at(&format!("request {i}"));
                    compare(CHECK, algorithm, support, at, &decision, &expected);
                }
                if !decision.allowed() {
                    break;
                }
                last_admitted = Some(now);
            }
            let Some(last_admitted) = last_admitted else {
                fail(
                    CHECK,
                    algorithm,
                    at("the first request"),
                    "denied",
                    "allowed",
                )
            };
            now = now.max(last_admitted + params.clear_after_us());
            let cost = params.max_cost();
            let at = at(&format!(
                "{} µs after the last admitted",
                now - last_admitted
            ));
            let answer = store.at(now).check(&key, &policy, cost).await;
            let decision = decided(CHECK, algorithm, &at, answer);
            let expected = model.check(&params, now, cost);
            if support == Support::Exact {
                compare(CHECK, algorithm, support, &at, &decision, &expected);
            }
            let whole: Vec<u64> = policy.rules().iter().map(|r| r.limit() - cost).collect();
            let remaining: Vec<u64> = decision.rules().iter().map(|r| r.remaining()).collect();
            if !decision.allowed() || remaining != whole {
                let answered = (decision.allowed(), remaining);
                fail(CHECK, algorithm, at, answered, (true, whole));
            }
        }
    }
}

/// Costs: at one instant, on a fresh key, requests of pseudo-random costs
/// are admitted and leave remaining exactly as the model says (every
/// field compared where the store runs the algorithm as defined; whether
/// each is allowed and each rule's remaining otherwise). A cost of zero,
/// or above what the policy can ever pass, is [`Error::Config`] at the
/// suite's times and at the store's own ([`Harness::store`] with no
/// clock); so is every check of an algorithm the store refuses
/// ([`Support::Refused`]).
///
/// # Panics
/// When a decision differs from the model's, or a cost or an algorithm
/// that must be refused is not refused with [`Error::Config`].
pub async fn costs<H: Harness>(harness: &H) {
    const CHECK: &str = "costs";
    let store = Timed::new(harness).await;
    let own = harness.store(None).await;
    let keys = Keys::new(CHECK);
    let mut now = T0;
    for (algorithm, _) in algorithms(harness, &[Support::Refused]) {
        let policy = lasting(algorithm, 5).policy();
        let key = keys.key(algorithm, 0, 0);
        let at = "an algorithm the store refuses";
        refused(
            CHECK,
            algorithm,
            at,
            store.at(now).check(&key, &policy, 1).await,
        );
        refused(CHECK, algorithm, at, own.check(&key, &policy, 1).await);
    }
    for (algorithm, support) in algorithms(harness, &[Support::Exact, Support::LimitOnly]) {
        for case in 0..CASES {
            let (seed, mut rng, params) = case_of(CHECK, algorithm, case);
            let (policy, max) = (params.policy(), params.max_cost());
            let key = keys.key(algorithm, case, 0);
            let at = |what: &str| format!("case {case} (seed {seed:#x}, {params:?}), {what}");
            now += rng.range(0, 1_000_000_000);
            for cost in [0, max + 1, u64::MAX] {
                let at = at(&format!("cost {cost}"));
                let answer = store.at(now).check(&key, &policy, cost).await;
                refused(CHECK, algorithm, &at, answer);
                refused(CHECK, algorithm, &at, own.check(&key, &policy, cost).await);
            }
            let mut model = KeyModel::default();
            let mut denials = 0;
            for i in 0..MOST {
                let cost = rng.range(1, max);
                let at = at(&format!("request {i} of cost {cost}"));
                let answer = store.at(now).check(&key, &policy, cost).await;
                let decision = decided(CHECK, algorithm, &at, answer);
                let expected = model.check(&params, now, cost);
                compare(CHECK, algorithm, support, &at, &decision, &expected);
                denials += u64::from(!decision.allowed());
                if denials == 3 {
                    break;
                }
            }
        }
    }
}

/// The parameters of case `case` of `algorithm`: a day-long policy of a
/// quota of 5 first, then pseudo-random ones.
fn case_of(check: &str, algorithm: Algorithm, case: u64) -> (u64, Rng, Params) {
    let seed = traces::seed(check, algorithm, case);
    let mut rng = Rng::new(seed);
    let params = match case {
        0 => lasting(algorithm, 5),
        _ => traces::params(&mut rng, algorithm),
    };
    (seed, rng, params)
}

/// Compares a decision with the model's outcome: every field when the
/// store runs the algorithm as defined, else whether the request is
/// allowed and each rule's remaining.
fn compare(
    check: &str,
    algorithm: Algorithm,
    support: Support,
    at: impl std::fmt::Display,
    decision: &Decision,
    expected: &Outcome,
) {
    let answered = Outcome::of(decision);
    let differs = match support {
        Support::Exact => answered != *expected,
        _ => {
            let remaining = |o: &Outcome| o.rules.iter().map(|r| r.0).collect::<Vec<_>>();
            answered.allowed != expected.allowed || remaining(&answered) != remaining(expected)
        }
    };
    if differs {
        fail(check, algorithm, at, answered, expected);
    }
}

/// Fails unless `answer` is a configuration error.
#[track_caller]
fn refused(
    check: &str,
    algorithm: Algorithm,
    at: impl std::fmt::Display,
    answer: Result<Decision, Error>,
) {
    if !matches!(answer, Err(Error::Config(_))) {
        fail(
            check,
            algorithm,
            at,
            answer.map(|d| Outcome::of(&d)),
            "Err(Config(..))",
        );
    }
}
