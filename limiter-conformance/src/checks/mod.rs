//! The checks, and what they share: key names, the algorithms a check
//! runs, and the message of a failure.

pub(crate) mod control;
pub(crate) mod failure;
pub(crate) mod own_time;
pub(crate) mod permits;
pub(crate) mod refunds;
pub(crate) mod reports;
pub(crate) mod timed;
pub(crate) mod traces;

use std::fmt::{Debug, Display};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{ALGORITHMS, Harness, Support};
use limiter_core::{Algorithm, Decision, Error, Key, ManualClock};

/// Where the checks' times start (µs since the Unix epoch, mid-2025).
const T0: u64 = 1_750_000_000_000_000;

/// A store on a clock the suite moves: what the checks at the suite's
/// times take.
struct Timed<S> {
    store: S,
    clock: ManualClock,
}

impl<S> Timed<S> {
    /// A fresh store of `harness`, its clock at [`T0`].
    async fn new<H: Harness<Store = S>>(harness: &H) -> Self {
        let clock = ManualClock::new(Duration::from_micros(T0));
        let store = harness.store(Some(clock.clone())).await;
        Self { store, clock }
    }

    /// The store, its clock at `now` (µs since the Unix epoch).
    fn at(&self, now: u64) -> &S {
        self.clock.set(Duration::from_micros(now));
        &self.store
    }
}

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

    /// The key named `name` of this run.
    fn key_of(&self, name: &str) -> String {
        format!("{}:{name}", self.run)
    }

    /// The key `key` of case `case` of `algorithm`.
    fn key(&self, algorithm: Algorithm, case: u64, key: usize) -> Key {
        Key::from(format!("{}:{algorithm}:{case}:k{key}", self.run))
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

/// A check that could not exercise what the store has: the harness hides
/// it, so the suite would pass without having checked it.
#[track_caller]
fn unexercised(check: &str, what: &str, harness_method: &str) -> ! {
    panic!(
        "conformance check `{check}` failed: the store has {what}, which the harness \
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
