//! Waiting for something that holds eventually: within a bound, looking
//! at an interval.

use std::time::{Duration, Instant};

/// How often [`first_true`] and [`warmed`] look.
pub const LOOK_EVERY: Duration = Duration::from_millis(50);
/// How long a warm-up step may take on a loaded machine.
pub const WARM_UP: Duration = Duration::from_secs(10);

/// Runs `step` every `every` until it answers `true`, and answers how long
/// that took since `since`; fails with `what` (read when it fails) once
/// `bound` has passed since `since` without it.
pub async fn until(
    since: Instant,
    bound: Duration,
    every: Duration,
    what: impl Fn() -> String,
    mut step: impl AsyncFnMut() -> bool,
) -> Duration {
    while !step().await {
        assert!(since.elapsed() < bound, "{}", what());
        tokio::time::sleep(every).await;
    }
    since.elapsed()
}

/// How long after `since` the first look that found `holds` true began,
/// looking every [`LOOK_EVERY`] for `within`; `None` when none did.
pub async fn first_true(
    since: Instant,
    within: Duration,
    mut holds: impl AsyncFnMut() -> bool,
) -> Option<Duration> {
    loop {
        let looked = since.elapsed();
        if holds().await {
            return Some(looked);
        }
        if since.elapsed() > within {
            return None;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// Asserts that what [`first_true`] found was found within `bound` (and
/// the one look that may straddle it).
pub fn assert_found_within(found: Option<Duration>, bound: Duration) {
    assert!(
        found.is_some_and(|after| after <= bound + LOOK_EVERY),
        "not within {bound:?}: {found:?}"
    );
}

/// Waits up to [`WARM_UP`] for `holds` through a warm-up step, or fails
/// naming it.
pub async fn warmed(step: &str, holds: impl AsyncFnMut() -> bool) {
    let found = first_true(Instant::now(), WARM_UP, holds).await;
    assert!(found.is_some(), "warm-up: {step}");
}
