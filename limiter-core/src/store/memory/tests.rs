//! The memory store: sweeping and eviction.

use std::time::Duration;

use super::shard::MIN_SWEEP_LEN;
use super::*;
use crate::{ManualClock, Rate, Rule};

#[test]
fn keys_whose_windows_passed_are_swept_as_new_keys_arrive() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let store = MemoryStore::with_clock_and_shards(clock.clone(), 1);
    // One request's GCRA state lasts one emission interval (100 ms).
    let policy = Policy::gcra(Rate::per_second(10).unwrap(), 5).unwrap();
    let check = |key: String| assert!(store.check_text(&key, &policy, 1).unwrap().allowed());
    (0..MIN_SWEEP_LEN).for_each(|i| check(format!("old{i}")));
    assert_eq!(store.len(), MIN_SWEEP_LEN);
    clock.advance(Duration::from_millis(100));
    // The shard is at its sweep length: the next new key sweeps it first.
    check("new0".into());
    assert_eq!(store.len(), 1);
    // Live keys are not swept: the shard grows past its sweep length.
    (1..=MIN_SWEEP_LEN).for_each(|i| check(format!("new{i}")));
    assert_eq!(store.len(), MIN_SWEEP_LEN + 1);
    clock.advance(Duration::from_millis(100));
    store.sweep();
    assert_eq!(store.len(), 0);
}

#[test]
fn a_full_store_evicts_expired_keys_first_then_the_least_recently_used() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(80);
    let short = Policy::fixed_window(Rule::new(5, Duration::from_secs(1)).unwrap());
    let long = Policy::fixed_window(Rule::new(5, Duration::from_secs(3600)).unwrap());
    for i in 0..40 {
        store.check_text(&format!("short{i}"), &short, 1).unwrap();
    }
    for i in 0..40 {
        clock.advance(Duration::from_millis(1));
        store.check_text(&format!("long{i}"), &long, 1).unwrap();
    }
    assert_eq!(store.len(), 80);
    // The short windows have passed: they make room first.
    clock.advance(Duration::from_secs(2));
    store.check_text("new0", &long, 1).unwrap();
    assert_eq!(store.len(), 41);
    for i in 1..40 {
        store.check_text(&format!("new{i}"), &long, 1).unwrap();
    }
    // Touch long0 so it is recent; the next new key evicts the oldest eighth
    // of 80 (long1..long10), not long0.
    store.check_text("long0", &long, 1).unwrap();
    store.check_text("newest", &long, 1).unwrap();
    assert_eq!(store.len(), 71);
    assert!((1..=10).all(|i| !store.holds(&format!("long{i}"))));
    assert!((11..40).all(|i| store.holds(&format!("long{i}"))));
    assert_eq!(store.check_text("long0", &long, 1).unwrap().remaining(), 2);
    assert_eq!(
        store.check_text("long11", &long, 1).unwrap().remaining(),
        3,
        "kept"
    );
}

#[test]
fn eviction_picks_the_least_recently_used_over_every_kind_of_state() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let store = MemoryStore::with_clock_and_shards(clock, 1).with_capacity(16);
    let gcra = Policy::gcra(Rate::per_second(1).unwrap(), 10).unwrap();
    let window = Policy::fixed_window(Rule::new(10, Duration::from_secs(3600)).unwrap());
    let remaining =
        |key: &str, policy: &Policy| store.check_text(key, policy, 1).unwrap().remaining();
    // Oldest first: window0..7, then gcra0..7; then window0 is used again.
    for i in 0..8 {
        assert_eq!(remaining(&format!("window{i}"), &window), 9);
    }
    for i in 0..8 {
        assert_eq!(remaining(&format!("gcra{i}"), &gcra), 9);
    }
    assert_eq!(remaining("window0", &window), 8);
    // Full: the next key evicts the least recently used eighth (2 keys),
    // window1 and window2, whatever table they are in.
    assert_eq!(remaining("new", &gcra), 9);
    assert_eq!(store.len(), 15);
    assert!(!store.holds("window1") && !store.holds("window2"));
    assert_eq!(remaining("window0", &window), 7, "kept");
    assert_eq!(remaining("window3", &window), 8, "kept");
    assert_eq!(remaining("gcra0", &gcra), 8, "kept");
}

#[test]
fn a_key_reused_with_another_algorithm_starts_fresh() {
    let store = MemoryStore::with_clock(ManualClock::new(Duration::from_secs(1)));
    let log = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 3).unwrap();
    assert!(store.check_text("k", &log, 1).unwrap().allowed());
    assert_eq!(store.check_text("k", &bucket, 1).unwrap().remaining(), 2);
    assert_eq!(store.len(), 1);
}
