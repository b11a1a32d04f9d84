//! Check 7: concurrency permits, for a store that keeps them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use tokio::task::JoinSet;

use super::{Keys, fail};
use crate::{Harness, Outcome};
use limiter_core::{
    Acquired, Algorithm, Capabilities, ConcurrencyLimit, Error, Permit, Store, required,
};

/// The most permits of a key held at once in this check.
const MAX: u64 = 3;
/// How long a dropped permit may take to be given back (a shared store
/// gives it back in a task of its own).
const GIVEN_BACK_WITHIN: Duration = Duration::from_secs(2);

/// When the store keeps concurrency permits (its
/// [`Capabilities`](limiter_core::Capabilities) answer [`Permits`](limiter_core::Permits)): of a limit of 3, three are taken one after
/// another and the fourth is denied; a dropped permit is given back (within
/// 2 s) and can be taken again. Then 16 tasks racing for permits of a
/// fresh key take exactly 3, and once those are dropped 3 can be taken
/// again.
///
/// Needs a Tokio runtime with its timer.
///
/// # Panics
/// When more or fewer permits than the maximum are held, a dropped permit
/// is not given back within 2 s, or taking a permit fails.
pub async fn permits<H: Harness>(harness: &H) {
    const CHECK: &str = "permits";
    let store = Arc::new(harness.store(None).await);
    if store.as_permits().is_none() {
        return;
    }
    let limit = ConcurrencyLimit::new(MAX).expect("a valid limit");
    let what = format!("a concurrency limit of {MAX}");
    let keys = Keys::new(CHECK);
    // Permits are no algorithm's: the keys are named after the sliding log.
    let key = keys.key(Algorithm::SlidingLog, 0, 0).into_string();
    let mut held: Vec<Permit> = Vec::new();
    for i in 0..MAX {
        match acquire(&what, &*store, &key, &limit).await {
            Acquired::Permit(permit) => held.push(permit),
            Acquired::Denied(d) => fail(
                CHECK,
                &what,
                format!("permit {i}"),
                Outcome::of(&d),
                "a permit",
            ),
        }
    }
    if let Acquired::Permit(p) = acquire(&what, &*store, &key, &limit).await {
        let granted = Outcome::of(p.decision());
        fail(CHECK, &what, format!("permit {MAX}"), granted, "a denial");
    }
    held.pop();
    let again = given_back(&what, &*store, &key, &limit, "a dropped permit").await;
    if let Acquired::Permit(p) = acquire(&what, &*store, &key, &limit).await {
        fail(
            CHECK,
            &what,
            "a permit past the one given back",
            p,
            "a denial",
        );
    }
    drop((again, held));

    const TASKS: usize = 16;
    let key: Arc<str> = keys.key(Algorithm::SlidingLog, 1, 0).into_string().into();
    let start = Arc::new(Barrier::new(TASKS));
    let mut tasks = JoinSet::new();
    for _ in 0..TASKS {
        let (store, key, limit, start) = (
            Arc::clone(&store),
            Arc::clone(&key),
            limit,
            Arc::clone(&start),
        );
        tasks.spawn(async move {
            start.wait().await;
            take(&*store, &key, &limit).await
        });
    }
    let mut racing = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let joined = joined.unwrap_or_else(|e| fail(CHECK, &what, "a task", e, "no panic"));
        match joined {
            Ok(Acquired::Permit(permit)) => racing.push(permit),
            Ok(Acquired::Denied(_)) => {}
            Err(e) => fail(
                CHECK,
                &what,
                "a racing permit",
                Err::<(), _>(e),
                "an answer",
            ),
        }
    }
    if racing.len() as u64 != MAX {
        let taken = format!("{} of {TASKS} racing tasks took a permit", racing.len());
        fail(CHECK, &what, "the race's end", taken, MAX);
    }
    drop(racing);
    let mut again = Vec::new();
    for i in 0..MAX {
        let at = format!("permit {i} after the race's were dropped");
        again.push(given_back(&what, &*store, &key, &limit, &at).await);
    }
}

/// A permit of `key` from a store that keeps permits (the check runs only
/// on such stores).
async fn take<S: Store>(store: &S, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
    required(store.as_permits(), "concurrency limits")?
        .acquire_permit(key, limit)
        .await
}

/// A permit of `key`, or a failure naming the error.
async fn acquire<S: Store>(what: &str, store: &S, key: &str, limit: &ConcurrencyLimit) -> Acquired {
    let answer: Result<Acquired, Error> = take(store, key, limit).await;
    answer.unwrap_or_else(|e| {
        fail(
            "permits",
            what,
            "taking a permit",
            Err::<(), _>(e),
            "an answer",
        )
    })
}

/// A permit of `key`, asked for again every 10 ms until one is given back
/// (at most [`GIVEN_BACK_WITHIN`]).
async fn given_back<S: Store>(
    what: &str,
    store: &S,
    key: &str,
    limit: &ConcurrencyLimit,
    at: &str,
) -> Permit {
    let started = Instant::now();
    loop {
        match acquire(what, store, key, limit).await {
            Acquired::Permit(permit) => return permit,
            Acquired::Denied(d) if started.elapsed() > GIVEN_BACK_WITHIN => {
                let waited = format!(
                    "still denied after {GIVEN_BACK_WITHIN:?}: {:?}",
                    Outcome::of(&d)
                );
                fail("permits", what, at, waited, "a permit given back");
            }
            Acquired::Denied(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
