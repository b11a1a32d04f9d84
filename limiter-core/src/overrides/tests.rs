use super::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn log(rules: &[(u64, u64)]) -> Policy {
    Policy::sliding_log(rules.iter().map(|&(n, w)| Rule::new(n, secs(w)).unwrap())).unwrap()
}

#[test]
fn text_round_trips_every_algorithm_and_mode() {
    let rate = Rate::new(10, secs(1)).unwrap();
    let policies = [
        log(&[(2, 60), (10, 3600)]),
        Policy::fixed_window(Rule::new(5, secs(60)).unwrap()),
        Policy::sliding_window(Rule::new(5, secs(60)).unwrap())
            .with_cost(2)
            .unwrap(),
        Policy::token_bucket(rate, 20).unwrap(),
        Policy::leaky_bucket(rate, 20).unwrap(),
        Policy::gcra(Rate::new(100, secs(60)).unwrap(), 20).unwrap(),
    ];
    for policy in policies {
        for value in [
            Override::rules(policy.clone()),
            Override::rules(policy.clone()).in_shadow(),
        ] {
            let text = value.to_text();
            assert_eq!(Override::from_text(&text), Ok(value), "{text}");
        }
    }
    assert_eq!(
        Override::rules(log(&[(2, 60), (10, 3600)])).to_text(),
        "enforce sliding_log 1 2/60000000,10/3600000000"
    );
    assert_eq!(Override::shadow().to_text(), "shadow");
    assert_eq!(Override::from_text("off"), Ok(Override::off()));
    assert_eq!(Override::from_text("shadow"), Ok(Override::shadow()));
}

#[test]
fn text_from_a_store_is_validated() {
    let error = |text: &str| Override::from_text(text).unwrap_err().to_string();
    assert_eq!(
        error("enforce sliding_log 1 2/0"),
        "the window of a rule must be at least 1 µs, got 0ns (limit 2)"
    );
    assert_eq!(
        error("enforce fixed_window 1 2/60000000,3/60000000"),
        "fixed_window takes exactly one rule, got 2"
    );
    assert_eq!(
        error("enforce sliding_log 3 2/60000000"),
        "a cost of 3 can never pass: it exceeds the limit of rule 2-per-60s of 2"
    );
    for garbage in [
        "",
        "enforce",
        "loud",
        "enforce nope 1 2/1",
        "enforce gcra 1 1/2",
        "off x",
    ] {
        assert!(Override::from_text(garbage).is_err(), "{garbage:?}");
    }
}

#[test]
fn an_override_keeps_the_limits_shape_and_cost() {
    let compiled = log(&[(10, 60)]).with_cost(2).unwrap();
    let tighter = Override::rules(log(&[(4, 60)]))
        .for_limit("posts", &compiled)
        .unwrap();
    assert_eq!(tighter.policy().unwrap().cost(), 2);
    assert_eq!(
        Override::rules(log(&[(1, 60)]))
            .for_limit("posts", &compiled)
            .unwrap_err()
            .to_string(),
        "a cost of 2 can never pass: it exceeds the limit of rule 1-per-60s of 1"
    );
    let window = Policy::fixed_window(Rule::new(2, secs(60)).unwrap());
    assert_eq!(
        Override::rules(window)
            .for_limit("posts", &compiled)
            .unwrap_err()
            .to_string(),
        "an override of \"posts\" must run sliding_log, as the limit does (its keys' state is \
         kept for it), not fixed_window"
    );
    let sliding = |w| Policy::sliding_window(Rule::new(2, secs(w)).unwrap());
    assert!(
        Override::rules(sliding(60))
            .for_limit("x", &sliding(60))
            .is_ok()
    );
    assert_eq!(
        Override::rules(sliding(30))
            .for_limit("x", &sliding(60))
            .unwrap_err()
            .to_string(),
        "an override of \"x\" must run sliding_window over 60s, as the limit does (its keys' \
         state is kept for it), not sliding_window over 30s"
    );
    assert_eq!(
        Override::off().for_limit("x", &compiled),
        Ok(Override::off())
    );
    assert!(Override::off().for_limit("a b", &compiled).is_err());
    assert!(Override::off().for_limit("", &compiled).is_err());
    assert!(
        Override::off()
            .for_limit(&"x".repeat(257), &compiled)
            .is_err()
    );
}

#[test]
fn durations_are_one_second_to_a_week() {
    assert!(validate_override_duration(secs(1)).is_ok());
    assert!(validate_override_duration(MAX_OVERRIDE).is_ok());
    assert_eq!(
        validate_override_duration(MAX_OVERRIDE + Duration::from_micros(1))
            .unwrap_err()
            .to_string(),
        "invalid override: an override lasts 1 s to a week (604800 s), got 604800 s"
    );
    assert!(validate_override_duration(Duration::from_millis(999)).is_err());
}

#[test]
fn the_table_ends_each_override_on_time() {
    let table = OverrideTable::new();
    assert!(table.is_empty());
    let now = 5_000_000;
    table.set("b", Override::off(), secs(10), now).unwrap();
    table.set("a", Override::shadow(), secs(20), now).unwrap();
    assert!(!table.is_empty());
    assert_eq!(
        table.get("b", now),
        Some((Arc::new(Override::off()), secs(10)))
    );
    assert_eq!(
        table.get("b", now + 9_999_999).map(|(_, left)| left),
        Some(Duration::from_micros(1))
    );
    assert_eq!(table.get("b", now + 10_000_000), None);
    let listed: Vec<_> = table
        .list(now + 10_000_000)
        .into_iter()
        .map(|o| (o.limit, o.left))
        .collect();
    assert_eq!(listed, [("a".to_owned(), secs(10))]);
    table.clear("a");
    assert_eq!(table.get("a", now), None);
    // "b" ended: the first check of it after its end swept it.
    assert!(table.is_empty());
    table
        .set("c", Override::off(), secs(1), now + 10_000_000)
        .unwrap();
    assert_eq!(table.list(now).len(), 1);
    table.replace([("d".to_owned(), Override::shadow(), secs(3))], now);
    assert_eq!(table.get("c", now), None);
    assert_eq!(
        table.get("d", now + 2_999_999).map(|(o, _)| o.mode()),
        Some(OverrideMode::Shadow)
    );
    table.clear("d");
    assert!(table.is_empty());
}

#[test]
fn the_table_is_bounded() {
    let table = OverrideTable::new();
    for i in 0..MAX_OVERRIDES {
        table
            .set(&format!("l{i}"), Override::off(), secs(10), 0)
            .unwrap();
    }
    assert_eq!(
        table
            .set("one-more", Override::off(), secs(10), 0)
            .unwrap_err()
            .to_string(),
        "invalid override: 1000 limits hold an override already"
    );
    // Replacing one held is not a new one; an ended one makes room.
    table.set("l0", Override::shadow(), secs(5), 0).unwrap();
    table
        .set("one-more", Override::off(), secs(10), 5_000_000)
        .unwrap();
    assert_eq!(table.get("l0", 5_000_000), None);
}

#[test]
fn the_overrides_gauge_counts_what_every_table_holds() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The snapshots give what moved since the last one.
    let mut gauge = 0.0;
    let mut read = || {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            if let (DebugValue::Gauge(moved), "limiter_overrides") = (value, key.key().name()) {
                gauge += moved.into_inner();
            }
        }
        gauge
    };
    let now = 1_000_000;
    metrics::with_local_recorder(&recorder, || {
        let first = OverrideTable::new();
        first.set("a", Override::off(), secs(60), now).unwrap();
        first.set("b", Override::off(), secs(10), now).unwrap();
        let second = OverrideTable::new();
        second.set("a", Override::off(), secs(60), now).unwrap();
        assert_eq!(read(), 3.0);
        // Ended: gone at its limit's first check after its end.
        let later = now + 10_000_000;
        assert_eq!(read(), 3.0);
        assert!(first.get("b", later).is_none());
        assert_eq!(read(), 2.0);
        second.clear("a");
        assert_eq!(read(), 1.0);
        drop(first);
        assert_eq!(read(), 0.0);
    });
}
