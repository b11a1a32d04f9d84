//! Check 1: the store decides every request of pseudo-random traces as the
//! model does, field by field.

use super::{Keys, T0, Timed, algorithms, decided, fail};
use crate::traces::{self, Rng};
use crate::{Harness, KeyModel, Outcome, Support};
use limiter_core::Store;

/// Traces per algorithm.
const CASES: u64 = 48;
/// Keys per trace: they share the store, never their state.
const KEYS: usize = 3;

/// Every algorithm the store runs as the policy defines
/// ([`Support::Exact`]) against the model, on the same timestamps:
/// pseudo-random policies (several rules for the sliding log, ties among
/// them; huge limits for the sliding window counter) and traces of (time
/// step, key, cost) at the suite's times; every field of every
/// decision must equal the model's.
///
/// # Panics
/// At the first decision that differs, naming the algorithm, the case and
/// its seed, the step, the policy, and both outcomes.
pub async fn traces<H: Harness>(harness: &H) {
    const CHECK: &str = "traces";
    let store = Timed::new(harness).await;
    let keys = Keys::new(CHECK);
    // Time moves forward across the cases too: a store that sweeps what
    // has expired by the latest time it was given never loses live state.
    let mut now = T0;
    for (algorithm, _) in algorithms(harness, &[Support::Exact]) {
        for case in 0..CASES {
            let seed = traces::seed(CHECK, algorithm, case);
            let mut rng = Rng::new(seed);
            // One case in eight of huge limits, where there are any.
            let huge = match case % 8 {
                7 => traces::huge_limit(&mut rng, algorithm),
                _ => None,
            };
            let params = huge.unwrap_or_else(|| traces::params(&mut rng, algorithm));
            let policy = params.policy();
            let steps = traces::trace(&mut rng, &params, KEYS);
            now += rng.range(0, 1_000_000_000);
            let mut models = vec![KeyModel::default(); KEYS];
            for (i, step) in steps.iter().enumerate() {
                now += step.advance_us;
                let key = keys.key(algorithm, case, step.key);
                let at =
                    || format!("case {case} (seed {seed:#x}, {params:?}), step {i} ({step:?})");
                let answer = store.at(now).check(&key, &policy, step.cost).await;
                let decision = decided(CHECK, algorithm, at(), answer);
                let expected = models[step.key].check(&params, now, step.cost);
                let answered = Outcome::of(&decision);
                if answered != expected {
                    fail(CHECK, algorithm, at(), answered, expected);
                }
            }
        }
    }
}
