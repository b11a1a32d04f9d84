//! The checks, and what they share: key names, the algorithms a check
//! runs, and the message of a failure.

pub(crate) mod control;
pub(crate) mod failure;
pub(crate) mod own_time;
pub(crate) mod permits;
pub(crate) mod refunds;
pub(crate) mod timed;
pub(crate) mod traces;

use std::fmt::{Debug, Display};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{ALGORITHMS, Harness, Support};
use limiter_core::{Algorithm, Decision, Error};

/// Where the checks' times start (µs since the Unix epoch, mid-2025).
const T0: u64 = 1_750_000_000_000_000;

/// The keys of one run of one check: unique to the run, so a store shared
/// by several runs needs no cleaning.
#[derive(Debug)]
struct Keys {
    run: String,
}

impl Keys {
    fn new(check: &str) -> Self {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        Self {
            run: format!("conformance:{}.{run}:{check}", std::process::id()),
        }
    }

    /// The key `key` of case `case` of `algorithm`.
    fn key(&self, algorithm: Algorithm, case: u64, key: usize) -> String {
        format!("{}:{algorithm}:{case}:k{key}", self.run)
    }
}

/// The algorithms `harness`'s store runs with a support in `wanted`.
fn algorithms<H: Harness>(harness: &H, wanted: &[Support]) -> Vec<(Algorithm, Support)> {
    ALGORITHMS
        .iter()
        .map(|&a| (a, harness.support(a)))
        .filter(|(_, support)| wanted.contains(support))
        .collect()
}

/// Fails check `check` for `algorithm` (or what else it checks) at `at`,
/// showing what the store answered and what was expected.
#[track_caller]
fn fail(
    check: &str,
    algorithm: impl Display,
    at: impl Display,
    store: impl Debug,
    expected: impl Debug,
) -> ! {
    panic!(
        "conformance check `{check}` failed for {algorithm} at {at}:\n  \
         the store answered {store:#?}\n  expected            {expected:#?}"
    )
}

/// A check that could not exercise a capability the store has: the
/// harness hides it, so the suite would pass without having checked it.
#[track_caller]
fn unexercised(check: &str, capability: &str, harness_method: &str) -> ! {
    panic!(
        "conformance check `{check}` failed: the store has {capability}, which the harness \
         does not exercise; implement {harness_method}"
    )
}

/// The decision of a check that must be decided, or a failure naming the error.
#[track_caller]
fn decided(
    check: &str,
    algorithm: impl Display,
    at: impl Display,
    answer: Result<Decision, Error>,
) -> Decision {
    answer.unwrap_or_else(|e| fail(check, algorithm, at, Err::<(), _>(e), "a decision"))
}
