use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::ManualClock;

const PERIOD: Duration = Duration::from_secs(300);
/// 1,000 s: in the period [900 s, 1,200 s).
const T0: Duration = Duration::from_secs(1_000);

fn top_of(k: usize, clock: &ManualClock) -> TopDenied<ManualClock> {
    TopDenied::with_clock(NonZeroUsize::new(k).unwrap(), PERIOD, clock.clone())
}

fn denied(identity: &str, count: u64, error: u64) -> Denied {
    Denied {
        identity: identity.to_owned(),
        count,
        error,
    }
}

#[test]
fn fewer_identities_than_counters_are_counted_exactly() {
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    for identity in ["a", "b", "a", "c", "a", "b", "a", "a", "b"] {
        top.record(identity);
    }
    assert_eq!(
        top.top(10),
        [denied("a", 5, 0), denied("b", 3, 0), denied("c", 1, 0)]
    );
    assert_eq!(top.top(2), [denied("a", 5, 0), denied("b", 3, 0)]);
    assert!(top.top(0).is_empty());
    assert_eq!(top.counted(), 9);
    assert_eq!(top.skipped(), 0);
}

#[test]
fn equal_counts_are_listed_by_identity() {
    let clock = ManualClock::new(T0);
    let top = top_of(4, &clock);
    for identity in ["c", "a", "b"] {
        top.record(identity);
    }
    assert_eq!(
        top.top(3),
        [denied("a", 1, 0), denied("b", 1, 0), denied("c", 1, 0)]
    );
}

#[test]
fn a_full_sketch_hands_its_smallest_counter_over() {
    let clock = ManualClock::new(T0);
    let top = top_of(2, &clock);
    // a: 3, b: 1; then c takes b's counter: 1 + 1, error 1.
    for identity in ["a", "a", "a", "b", "c"] {
        top.record(identity);
    }
    assert_eq!(top.top(10), [denied("a", 3, 0), denied("c", 2, 1)]);
    // And d takes c's: 2 + 1, error 2.
    top.record("d");
    assert_eq!(top.top(10), [denied("a", 3, 0), denied("d", 3, 2)]);
}

#[test]
fn denials_count_for_one_period_after_their_own_and_are_gone_after_two() {
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    top.record("a");
    top.record("a");
    // One period later: in the previous sketch, still counted.
    clock.advance(PERIOD);
    assert_eq!(top.top(10), [denied("a", 2, 0)]);
    top.record("a");
    top.record("b");
    assert_eq!(top.top(10), [denied("a", 3, 0), denied("b", 1, 0)]);
    assert_eq!(top.counted(), 4);
    // Two periods after the first denials: those are gone, the later ones
    // (one period old) still count.
    clock.advance(PERIOD);
    assert_eq!(top.top(10), [denied("a", 1, 0), denied("b", 1, 0)]);
    assert_eq!(top.counted(), 2);
    // Two periods after those: nothing.
    clock.advance(PERIOD);
    assert!(top.top(10).is_empty());
    assert_eq!(top.counted(), 0);
}

#[test]
fn periods_are_counted_from_the_epoch() {
    // 1,000 s is in the period [900 s, 1,200 s): the denial is read until
    // 1,500 s, the end of the period after its own, and not a microsecond
    // longer.
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    top.record("a");
    clock.set(Duration::from_micros(1_500_000_000 - 1));
    assert_eq!(top.top(10), [denied("a", 1, 0)]);
    clock.set(Duration::from_secs(1_500));
    assert!(top.top(10).is_empty());
}

#[test]
fn many_periods_at_once_forget_everything() {
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    top.record("a");
    clock.advance(PERIOD * 10);
    top.record("b");
    assert_eq!(top.top(10), [denied("b", 1, 0)]);
}

#[test]
fn a_clock_that_steps_back_keeps_the_counts() {
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    top.record("a");
    clock.set(T0 - PERIOD * 2);
    top.record("a");
    assert_eq!(top.top(10), [denied("a", 2, 0)]);
}

#[test]
fn merged_periods_add_a_missing_identitys_floor() {
    let clock = ManualClock::new(T0);
    let top = top_of(2, &clock);
    // Previous period: a 3, b 2 (full, floor 2).
    for identity in ["a", "a", "a", "b", "b"] {
        top.record(identity);
    }
    clock.advance(PERIOD);
    // Current period: c 1 (not full: floor 0).
    top.record("c");
    assert_eq!(
        top.top(10),
        [denied("a", 3, 0), denied("c", 3, 2), denied("b", 2, 0)]
    );
}

#[test]
fn identities_longer_than_the_maximum_are_skipped_not_cut() {
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    let longest = "x".repeat(TopDenied::<ManualClock>::MAX_IDENTITY);
    let longer = "x".repeat(TopDenied::<ManualClock>::MAX_IDENTITY + 1);
    top.record(&longer);
    top.record(&longest);
    assert_eq!(top.skipped(), 1);
    assert_eq!(top.counted(), 1);
    assert_eq!(top.top(10), [denied(&longest, 1, 0)]);
}

#[test]
fn identities_are_recorded_whole_under_their_kind() {
    let clock = ManualClock::new(T0);
    let top = top_of(8, &clock);
    // Longer than a key keeps (it hashes past 128 bytes), shown whole.
    let key = "k".repeat(480);
    top.record_identity(&crate::Identity::header("x-api-key", &key));
    // Its text would pass the maximum: skipped, its text never built.
    let max = TopDenied::<ManualClock>::MAX_IDENTITY;
    top.record_identity(&crate::Identity::user("u".repeat(max + 1)));
    // Escaping triples a byte past ASCII: past the maximum once labelled.
    top.record_identity(&crate::Identity::user(vec![0xff; 200]));
    assert_eq!(top.skipped(), 2);
    let labelled = format!("header x-api-key {key}");
    assert_eq!(top.top(10), [denied(&labelled, 1, 0)]);
}

#[test]
fn nothing_is_allocated_before_the_first_denial() {
    let top = TopDenied::new();
    assert_eq!(top.memory(), 0);
    assert!(top.top(10).is_empty());
    assert_eq!(TopDenied::MAX_BYTES, top.max_memory());
}

/// One identity denied 2,000 times among 100,000 denied once each,
/// interleaved: it comes first, within `N / k` of its count, and memory
/// stays under the bound.
#[test]
fn a_flood_of_distinct_identities_hides_no_heavy_one() {
    let clock = ManualClock::new(T0);
    let k = TopDenied::DEFAULT_COUNTERS;
    let top = top_of(k, &clock);
    let heavy = "user=mallory";
    let mut heavy_left = 2_000;
    for i in 0..100_000u32 {
        // Identities of the layers' longest address form, and longer.
        top.record(&format!("2001%3Adb8%3A{i:x}%3A%3A/64"));
        if i % 50 == 49 {
            top.record(heavy);
            heavy_left -= 1;
        }
    }
    assert_eq!(heavy_left, 0);
    let n: u64 = 102_000;
    assert_eq!(top.counted(), n);
    let first = &top.top(1)[0];
    assert_eq!(first.identity, heavy);
    let bound = n / k as u64;
    assert!(
        (2_000..=2_000 + bound).contains(&first.count),
        "{first:?}, bound {bound}"
    );
    assert!(first.error <= bound, "{first:?}");
    assert!(first.count - first.error <= 2_000, "{first:?}");
    assert_eq!(top.top(usize::MAX).len(), k);
    assert!(top.memory() <= top.max_memory());
    assert!(top.memory() <= TopDenied::MAX_BYTES);

    // The bound holds with identities of the longest length too, over two
    // periods.
    let longest = |i: u32| format!("{i:0512}");
    for i in 0..2 * k as u32 {
        top.record(&longest(i));
    }
    clock.advance(PERIOD);
    for i in 0..2 * k as u32 {
        top.record(&longest(i + 10_000));
    }
    assert!(
        top.memory() <= TopDenied::MAX_BYTES,
        "{} > {}",
        top.memory(),
        TopDenied::MAX_BYTES
    );
}

/// Checks both guarantees of a reading against the true counts of the
/// denials it covers.
fn check_bounds(read: &[Denied], truth: &HashMap<String, u64>, k: usize) {
    let n: u64 = truth.values().sum();
    for entry in read {
        let true_count = truth.get(&entry.identity).copied().unwrap_or(0);
        assert!(entry.count >= true_count, "{entry:?}, true {true_count}");
        assert!(
            entry.count - entry.error <= true_count,
            "{entry:?}, true {true_count}"
        );
        // error <= N / k, in integers.
        assert!(entry.error * k as u64 <= n, "{entry:?}, N {n}, k {k}");
    }
    for (identity, &count) in truth {
        if count * k as u64 > n {
            assert!(
                read.iter().any(|e| &e.identity == identity),
                "{identity} ({count} of {n}, k {k}) is missing"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every count within its error of the truth, every error at most
    /// `N / k`, every identity denied more than `N / k` times listed: in
    /// one period, and over two.
    #[test]
    fn counts_stay_within_n_over_k(
        k in 1usize..12,
        // Skewed: small numbers come up more often.
        first in proptest::collection::vec((0u32..6, 0u32..40), 0..400),
        second in proptest::collection::vec((0u32..6, 0u32..40), 0..400),
    ) {
        let clock = ManualClock::new(T0);
        let top = top_of(k, &clock);
        let name = |(a, b): (u32, u32)| format!("id{}", a.min(b));
        let mut truth: HashMap<String, u64> = HashMap::new();
        for &pair in &first {
            top.record(&name(pair));
            *truth.entry(name(pair)).or_default() += 1;
        }
        check_bounds(&top.top(usize::MAX), &truth, k);
        prop_assert!(top.windows.lock().current.heap_holds());
        clock.advance(PERIOD);
        for &pair in &second {
            top.record(&name(pair));
            *truth.entry(name(pair)).or_default() += 1;
        }
        let read = top.top(usize::MAX);
        check_bounds(&read, &truth, k);
        prop_assert!(read.len() <= 2 * k);
        prop_assert_eq!(top.counted(), (first.len() + second.len()) as u64);
        let windows = top.windows.lock();
        prop_assert!(windows.current.heap_holds() && windows.previous.heap_holds());
    }
}

#[test]
fn a_report_reads_back_from_its_text_whatever_its_identities() {
    let clock = ManualClock::new(T0);
    let top = top_of(2, &clock);
    for identity in [
        "a b",
        "a b",
        "",
        "line\nbreak",
        "line\nbreak",
        "line\nbreak",
    ] {
        top.record(identity);
    }
    // The line break took the empty identity's counter over: the sketch is
    // full, and its floor is its smallest count.
    let report = top.report(10);
    let expected = DeniedReport {
        denied: vec![denied("line\nbreak", 4, 1), denied("a b", 2, 0)],
        floor: 2,
        counted: 6,
    };
    assert_eq!(report, expected);
    assert_eq!(
        DeniedReport::from_text(&report.to_text()),
        Some(report.clone())
    );
    // Cut to one, the first left out bounds the floor too.
    let cut = top.report(1);
    assert_eq!((cut.denied.len(), cut.floor), (1, 2));
    let empty = DeniedReport {
        denied: vec![denied("", 1, 0)],
        floor: 0,
        counted: 1,
    };
    assert_eq!(DeniedReport::from_text(&empty.to_text()), Some(empty));
    for other in [
        "",
        "limiter-top-denied 2 0 0 0\n",
        "limiter-top-denied 1 0 0 1\n",
    ] {
        assert_eq!(DeniedReport::from_text(other), None, "{other:?}");
    }
    let text = report.to_text();
    assert_eq!(DeniedReport::from_text(&format!("{text}more")), None);
    assert_eq!(DeniedReport::from_text(&text[..text.len() - 1]), None);
}

#[test]
fn merged_reports_add_counts_and_a_missing_identitys_floor() {
    let report = |denied: Vec<Denied>, floor| DeniedReport {
        denied,
        floor,
        counted: 0,
    };
    let a = report(vec![denied("x", 5, 0), denied("y", 3, 1)], 2);
    let b = report(vec![denied("y", 4, 0), denied("z", 1, 0)], 0);
    assert_eq!(
        DeniedReport::merge([&a, &b], 10),
        // x: 5 here, at most b's floor (0) there; z: at most a's floor.
        [denied("y", 7, 1), denied("x", 5, 0), denied("z", 3, 2)]
    );
    assert_eq!(DeniedReport::merge([&a, &b], 1), [denied("y", 7, 1)]);
    assert!(DeniedReport::merge([], 10).is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Across instances, each publishing its reports cut to `n` and read
    /// back from text: every merged count is at least the identity's true
    /// count over all instances and over it by at most its error; uncut,
    /// every error is at most `N / k` and every identity denied more than
    /// `N / k` times in all is listed.
    #[test]
    fn merged_reports_keep_the_bounds(
        k in 1usize..8,
        n in 1usize..20,
        streams in proptest::collection::vec(
            proptest::collection::vec((0u32..6, 0u32..30), 0..200),
            1..4,
        ),
    ) {
        let clock = ManualClock::new(T0);
        let name = |(a, b): (u32, u32)| format!("id{}", a.min(b));
        let mut truth: HashMap<String, u64> = HashMap::new();
        let mut cut = Vec::new();
        let mut whole = Vec::new();
        for stream in &streams {
            let top = top_of(k, &clock);
            for &pair in stream {
                top.record(&name(pair));
                *truth.entry(name(pair)).or_default() += 1;
            }
            let read = |n| DeniedReport::from_text(&top.report(n).to_text()).unwrap();
            cut.push(read(n));
            whole.push(read(usize::MAX));
        }
        for entry in DeniedReport::merge(&cut, usize::MAX) {
            let true_count = truth.get(&entry.identity).copied().unwrap_or(0);
            prop_assert!(entry.count >= true_count, "{:?}, true {}", entry, true_count);
            prop_assert!(entry.count - entry.error <= true_count, "{:?}, true {}", entry, true_count);
        }
        check_bounds(&DeniedReport::merge(&whole, usize::MAX), &truth, k);
    }
}
