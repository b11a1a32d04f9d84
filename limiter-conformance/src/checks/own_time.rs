//! Checks 2 and 5, on the store's own time ([`Store::check`]): exactness
//! when tasks race, and checks dropped at every await.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Barrier;
use tokio::task::JoinSet;

use super::{Keys, algorithms, decided, fail};
use crate::traces::lasting;
use crate::{Harness, Support};
use limiter_core::{Algorithm, Decision, Error, Key, Policy, Store};

/// How long a check may take on a store that answers (a loaded test
/// machine included) before the suite calls it hung.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Tasks racing on one key, for each algorithm the store runs: started
/// together, each checking once with [`Store::check`] on the store's own
/// time, they admit exactly the limit (20), and the key is full after them.
/// The policies hold their quota for a day (an hour per token), so nothing
/// frees up while the tasks run.
///
/// Needs a Tokio runtime with its timer (as `#[tokio::test]` gives); more
/// worker threads make the race tighter.
///
/// # Panics
/// When more or fewer than the limit are admitted, a check fails or a task
/// panics.
pub async fn concurrency<H: Harness>(harness: &H) {
    const CHECK: &str = "concurrency";
    const QUOTA: u64 = 20;
    const TASKS: usize = 64;
    let store = Arc::new(harness.store(None).await);
    let keys = Keys::new(CHECK);
    for (algorithm, _) in algorithms(harness, &[Support::Exact, Support::LimitOnly]) {
        let policy = Arc::new(lasting(algorithm, QUOTA).policy());
        let key = Arc::new(keys.key(algorithm, 0, 0));
        let start = Arc::new(Barrier::new(TASKS));
        let mut tasks = JoinSet::new();
        for _ in 0..TASKS {
            let (store, policy, key, start) = (
                Arc::clone(&store),
                Arc::clone(&policy),
                Arc::clone(&key),
                Arc::clone(&start),
            );
            tasks.spawn(async move {
                start.wait().await;
                answer(store.check(&key, &policy, 1)).await
            });
        }
        let mut allowed = 0;
        while let Some(joined) = tasks.join_next().await {
            let answer = joined.unwrap_or_else(|e| fail(CHECK, algorithm, "a task", e, "no panic"));
            allowed += u64::from(decided(CHECK, algorithm, "a racing check", answer).allowed());
        }
        let admitted = format!("{allowed} of {TASKS} admitted");
        if allowed != QUOTA {
            fail(CHECK, algorithm, "the race's end", admitted, QUOTA);
        }
        let after = answer(store.check(&key, &policy, 1)).await;
        if decided(CHECK, algorithm, "the check after the race", after).allowed() {
            fail(
                CHECK,
                algorithm,
                "the check after the race",
                "allowed",
                "denied",
            );
        }
    }
}

/// A check dropped after 0, 1, 2, … polls, until one completes, for each
/// algorithm the store runs (on a fresh store and key each time, so the
/// drop lands at each await of a first check: connecting, loading a
/// script, the call in flight). After each drop the store must still
/// answer, and the key must admit its limit (5) less the dropped check if
/// that was recorded: exactly 5 or 4, never more; a check that completes
/// must be allowed, and leave 4.
///
/// Between polls the suite sleeps briefly so the store's I/O progresses.
/// Needs a Tokio runtime with its timer.
///
/// # Panics
/// When the key admits more than its limit or fewer than its limit less
/// one, a check after a drop fails or hangs (10 s), or no check completes
/// within 10,000 polls.
pub async fn cancellation<H: Harness>(harness: &H) {
    const CHECK: &str = "cancellation";
    const QUOTA: u64 = 5;
    const MAX_POLLS: u64 = 10_000;
    let keys = Keys::new(CHECK);
    for (algorithm, _) in algorithms(harness, &[Support::Exact, Support::LimitOnly]) {
        let policy = lasting(algorithm, QUOTA).policy();
        let mut completed = false;
        for polls in 0..MAX_POLLS {
            let store = harness.store(None).await;
            let key = keys.key(algorithm, polls, 0);
            let dropped = poll_then_drop(store.check(&key, &policy, 1), polls).await;
            let at = format!("a check dropped after {polls} polls");
            let expected = match dropped {
                Some(answer) => {
                    if !decided(CHECK, algorithm, &at, answer).allowed() {
                        fail(CHECK, algorithm, at, "denied", "allowed");
                    }
                    completed = true;
                    QUOTA - 1..=QUOTA - 1
                }
                None => QUOTA - 1..=QUOTA,
            };
            let allowed = fill(CHECK, algorithm, &at, &store, &key, &policy, QUOTA + 1).await;
            if !expected.contains(&allowed) {
                let admitted = format!("{allowed} admitted after it");
                fail(CHECK, algorithm, at, admitted, expected);
            }
            if completed {
                break;
            }
        }
        if !completed {
            let never = format!("no check completed within {MAX_POLLS} polls");
            fail(CHECK, algorithm, "the last poll", never, "a decision");
        }
    }
}

/// Checks `key` one request at a time (at most `most`) until one is
/// denied; answers how many were allowed.
async fn fill<S: Store>(
    check: &str,
    algorithm: Algorithm,
    at: &str,
    store: &S,
    key: &Key,
    policy: &Policy,
    most: u64,
) -> u64 {
    let mut allowed = 0;
    for _ in 0..most {
        let answer = answer(store.check(key, policy, 1)).await;
        if !decided(check, algorithm, at, answer).allowed() {
            break;
        }
        allowed += 1;
    }
    allowed
}

/// The answer of `check`, or a timeout error if it takes longer than
/// [`ANSWER_WITHIN`].
async fn answer(check: impl Future<Output = Result<Decision, Error>>) -> Result<Decision, Error> {
    tokio::time::timeout(ANSWER_WITHIN, check)
        .await
        .unwrap_or(Err(Error::Timeout(ANSWER_WITHIN)))
}

/// Polls `future` at most `polls` times, sleeping 200 µs between polls so
/// its I/O makes progress; drops it if it has not finished (`None`). What
/// the [`cancellation`] check drops checks with, for tests of other futures
/// that must be dropped at every await point.
pub async fn poll_then_drop<F: Future>(future: F, polls: u64) -> Option<F::Output> {
    let mut future = pin!(future);
    for _ in 0..polls {
        let poll = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
        if let Poll::Ready(output) = poll {
            return Some(output);
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    None
}
