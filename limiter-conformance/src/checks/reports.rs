//! Check 12: the reports instances publish through the store for each
//! other (each limit's top offenders).

use std::time::Duration;

use limiter_core::{Capabilities, Error, Report};

use super::{Keys, T0, Timed};
use crate::Harness;

/// When the store keeps reports
/// ([`SharedControl::publish_report`](limiter_core::SharedControl::publish_report)):
/// each instance's latest report on a board is read with its age by the
/// store's clock, until its time to live has passed and not a
/// microsecond longer; another board is apart; a report past the bounds
/// is refused with [`Error::Full`].
///
/// # Panics
/// At the first answer that differs, showing it and what was expected.
pub async fn reports<H: Harness>(harness: &H) {
    let store = Timed::new(harness).await;
    let Some(shared) = store.store.as_shared_control() else {
        return;
    };
    let keys = Keys::new("reports");
    let (board, other) = (keys.key_of("board"), keys.key_of("other"));
    let ttl = Duration::from_secs(15);
    let second = 1_000_000;
    match shared.publish_report(&board, "a", "first", ttl).await {
        Err(Error::Unsupported(_)) => return,
        published => published.expect("reports: a report published"),
    }
    let publish = async |at: u64, instance: &str, body: &str| {
        store.at(at);
        (shared.publish_report(&board, instance, body, ttl).await)
            .unwrap_or_else(|error| panic!("reports: {instance}'s report at {at}: {error}"));
    };
    publish(T0 + second, "a", "second\nof two lines").await;
    publish(T0 + 2 * second, "b", "").await;
    let read = async |at: u64, on: &str| {
        store.at(at);
        let mut read = (shared.reports(on).await).expect("reports: the board read");
        read.sort_by(|x, y| x.instance.cmp(&y.instance));
        read
    };
    let report = |instance: &str, age: u64, body: &str| Report {
        instance: instance.to_owned(),
        age: Duration::from_micros(age),
        body: body.to_owned(),
    };
    let a_ends = T0 + second + 15 * second;
    assert_eq!(
        read(a_ends, &board).await,
        [
            report("a", 15 * second, "second\nof two lines"),
            report("b", 14 * second, "")
        ],
        "reports: each instance's latest, read until its time to live has passed"
    );
    assert_eq!(
        read(a_ends + 1, &board).await,
        [report("b", 14 * second + 1, "")],
        "reports: a report past its time to live is gone"
    );
    assert_eq!(
        read(a_ends + 1, &other).await,
        [],
        "reports: another board is apart"
    );
    let long = "x".repeat(limiter_core::MAX_REPORT_BYTES + 1);
    assert!(
        matches!(
            shared.publish_report(&board, "c", &long, ttl).await,
            Err(Error::Full(_))
        ),
        "reports: a report past its bound is refused"
    );
}
