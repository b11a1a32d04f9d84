//! Check 6: a store whose backend does not answer answers an error in time.

use std::future::Future;
use std::time::Duration;

use super::{Keys, T0, algorithms, fail, unexercised};
use crate::traces::lasting;
use crate::{Harness, Outcome, Support};
use limiter_core::ManualClock;
use limiter_core::{Algorithm, Capabilities, Decision, Error, Store};

/// How long a store whose backend does not answer may take to say so.
const WITHIN: Duration = Duration::from_secs(2);

/// On the store [`Harness::unreachable`] gives (skipped for a store in
/// process; a store across a network, [`is_remote`](limiter_core::Capabilities::is_remote),
/// fails the check without one): every check, three times over, at the
/// store's own time and on the suite's clock, answers a store error
/// (not [`Error::Config`], not [`Error::Unsupported`]) within 2 s, never
/// a decision, never hanging; a cost of zero is still [`Error::Config`],
/// refused before any call, and so is an algorithm the store refuses.
///
/// Needs a Tokio runtime with its timer.
///
/// # Panics
/// When a check hangs past 2 s, decides, or answers the wrong error.
pub async fn failure<H: Harness>(harness: &H) {
    const CHECK: &str = "failure";
    let Some(store) = harness.unreachable(None).await else {
        if harness.store(None).await.is_remote() {
            unexercised(CHECK, "a backend across a network", "Harness::unreachable");
        }
        return;
    };
    let clock = ManualClock::new(Duration::from_micros(T0));
    let timed = (harness.unreachable(Some(clock)).await)
        .unwrap_or_else(|| unexercised(CHECK, "a clock", "Harness::unreachable with it"));
    let keys = Keys::new(CHECK);
    let all = [Support::Exact, Support::LimitOnly, Support::Refused];
    for (algorithm, support) in algorithms(harness, &all) {
        let policy = lasting(algorithm, 5).policy();
        let key = keys.key(algorithm, 0, 0);
        let zero = within(
            CHECK,
            algorithm,
            "a cost of 0",
            store.check(&key, &policy, 0),
        )
        .await;
        if !matches!(zero, Err(Error::Config(_))) {
            let zero = zero.map(|d| Outcome::of(&d));
            fail(CHECK, algorithm, "a cost of 0", zero, "Err(Config(..))");
        }
        for attempt in 0..3 {
            let own_time = store.check(&key, &policy, 1);
            let at = format!("check {attempt} (Store::check)");
            expect_failure(
                CHECK,
                algorithm,
                support,
                &at,
                within(CHECK, algorithm, &at, own_time).await,
            );
            let at_time = timed.check(&key, &policy, 1);
            let at = format!("check {attempt} (on the suite's clock)");
            expect_failure(
                CHECK,
                algorithm,
                support,
                &at,
                within(CHECK, algorithm, &at, at_time).await,
            );
        }
    }
}

/// The answer of `check`, or a failure if there is none within [`WITHIN`].
async fn within(
    check: &str,
    algorithm: Algorithm,
    at: &str,
    call: impl Future<Output = Result<Decision, Error>>,
) -> Result<Decision, Error> {
    tokio::time::timeout(WITHIN, call)
        .await
        .unwrap_or_else(|_| {
            fail(
                check,
                algorithm,
                at,
                "no answer",
                format!("an error within {WITHIN:?}"),
            )
        })
}

/// Fails unless `answer` is a store error (a configuration error for an
/// algorithm the store refuses).
fn expect_failure(
    check: &str,
    algorithm: Algorithm,
    support: Support,
    at: &str,
    answer: Result<Decision, Error>,
) {
    let expected = match (&answer, support) {
        (Err(Error::Config(_)), Support::Refused) => return,
        (_, Support::Refused) => "Err(Config(..)): the store refuses the algorithm",
        (Err(Error::Config(_) | Error::Unsupported(_)), _) | (Ok(_), _) => "a store error",
        (Err(_), _) => return,
    };
    fail(
        check,
        algorithm,
        at,
        answer.map(|d| Outcome::of(&d)),
        expected,
    );
}
