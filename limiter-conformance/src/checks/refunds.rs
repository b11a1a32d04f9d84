//! Check 11: requests counted by outcome, given back later, leave the
//! store where the model is.

use super::{Keys, T0, Timed, algorithms, fail};
use crate::traces::{self, Rng};
use crate::{Harness, KeyModel, Outcome, Support};
use limiter_core::{Capabilities, Error, Receipt};

/// Traces per algorithm.
const CASES: u64 = 16;
/// Keys per trace.
const KEYS: usize = 2;

/// When the store counts by outcome ([`KeyState`](limiter_core::KeyState)): on
/// pseudo-random traces of every algorithm that refunds exactly, each
/// allowed request is given back at once, at a random later step, or
/// never; every decision equals the model's, where the model gives back
/// the same requests ([`KeyModel::refund`]). An algorithm that cannot
/// refund exactly is refused with [`Error::Config`].
///
/// # Panics
/// At the first answer that differs, naming the algorithm, the case, the
/// step, and both outcomes.
pub async fn refunds<H: Harness>(harness: &H) {
    const CHECK: &str = "refunds";
    let store = Timed::new(harness).await;
    let Some(refunds) = store.store.as_key_state() else {
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
            // Receipts to give back later: (key, receipt).
            let mut held: Vec<(usize, Receipt)> = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                now += step.advance_us;
                let at =
                    || format!("case {case} (seed {seed:#x}, {params:?}), step {i} ({step:?})");
                let key = keys.key(algorithm, case, step.key);
                store.at(now);
                let answer = refunds.check_refundable(&key, &policy, step.cost).await;
                if !algorithm.refunds_exactly() {
                    if !matches!(answer, Err(Error::Config(_))) {
                        fail(CHECK, algorithm, at(), answer.map(|_| ()), "Error::Config");
                    }
                    break;
                }
                let (decision, receipt) = answer.unwrap_or_else(|error| {
                    fail(CHECK, algorithm, at(), Err::<(), _>(error), "a decision")
                });
                let outcome = Outcome::of(&decision);
                let expected = models[step.key].check(&params, now, step.cost);
                if outcome != expected {
                    fail(CHECK, algorithm, at(), outcome, expected);
                }
                let expected_receipt = decision.allowed().then(|| Receipt::new(now, step.cost));
                if receipt != expected_receipt {
                    fail(CHECK, algorithm, at(), receipt, expected_receipt);
                }
                if let Some(receipt) = receipt {
                    held.push((step.key, receipt));
                }
                // Give back the newest, or one held longer, or none.
                let give_back = match rng.range(0, 3) {
                    0 => held.pop(),
                    1 if !held.is_empty() => {
                        let which = rng.range(0, held.len() as u64 - 1) as usize;
                        Some(held.swap_remove(which))
                    }
                    _ => None,
                };
                if let Some((k, receipt)) = give_back {
                    let key = keys.key(algorithm, case, k);
                    if let Err(error) = refunds.refund(&key, &policy, &receipt).await {
                        fail(CHECK, algorithm, at(), Err::<(), _>(error), "the refund");
                    }
                    models[k].refund(&params, receipt.at_us(), receipt.cost());
                }
            }
        }
    }
}
