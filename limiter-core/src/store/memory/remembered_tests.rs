//! The exact table of evicted keys: a flood of distinct keys, each using
//! its whole quota, takes nothing from keys the store has never seen, and
//! every evicted key that returns gets exactly its own state back.

use super::ghost_tests::{S, T0, six_policies};
use super::*;
use crate::{ManualClock, Rate, Rule};

/// Checks `key` until it is denied: its whole quota used.
fn use_up(store: &MemoryStore<ManualClock>, key: &str, policy: &Policy) -> usize {
    (0..)
        .take_while(|_| store.check_text(key, policy, 1).unwrap().allowed())
        .count()
}

#[test]
fn a_flood_of_three_times_the_capacity_denies_no_new_key() {
    for policy in six_policies() {
        let name = policy.algorithm();
        let clock = ManualClock::new(T0);
        // One shard: every key competes for the same 64 places.
        let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(64);
        let fresh = MemoryStore::with_clock_and_shards(clock.clone(), 1);
        for i in 0..192 {
            assert_eq!(use_up(&store, &format!("flood{i}"), &policy), 3, "{name}");
        }
        assert_eq!(store.len(), 64, "{name}");
        assert_eq!(store.remembered_evicted().0, 128, "{name}");
        clock.advance(S);
        // 100 new keys, evicting 100 more: still within the 256 remembered.
        let mut denied = 0;
        for i in 0..100 {
            let key = format!("new{i}");
            let decision = store.check_text(&key, &policy, 1).unwrap();
            assert_eq!(
                decision,
                fresh.check_text(&key, &policy, 1).unwrap(),
                "{name}"
            );
            denied += usize::from(!decision.allowed());
        }
        assert_eq!(denied, 0, "{name}");
    }
}

#[test]
fn every_evicted_key_that_returns_gets_exactly_its_state() {
    for policy in six_policies() {
        let name = policy.algorithm();
        let clock = ManualClock::new(T0);
        let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(64);
        let twin = MemoryStore::with_clock_and_shards(clock.clone(), 1);
        for i in 0..192 {
            let key = format!("flood{i}");
            for _ in 0..2 {
                assert_eq!(
                    store.check_text(&key, &policy, 1).unwrap(),
                    twin.check_text(&key, &policy, 1).unwrap(),
                    "{name}"
                );
            }
        }
        // They come back in the order they came (the evicted ones first),
        // evicting one another again.
        for since in [5, 25, 61] {
            clock.set(T0 + since * S);
            for i in 0..192 {
                let key = format!("flood{i}");
                assert_eq!(
                    store.check_text(&key, &policy, 1).unwrap(),
                    twin.check_text(&key, &policy, 1).unwrap(),
                    "{name}, {key} at T0 + {since} s"
                );
            }
        }
    }
}

#[test]
fn the_default_store_keeps_new_users_whole_after_a_flood() {
    // The default's proportions at a hundredth of its size: 64 shards of
    // 100 keys, each remembering 400 evicted keys.
    let clock = ManualClock::new(T0);
    let store = MemoryStore::with_clock(clock.clone()).with_capacity(6_400);
    let replies = Policy::sliding_log([Rule::new(5, 60 * S).unwrap()]).unwrap();
    for i in 0..19_200 {
        assert_eq!(use_up(&store, &format!("flood{i}"), &replies), 5);
    }
    clock.advance(S);
    let denied = (0..2_000)
        .filter(|i| {
            let decision = store.check_text(&format!("new{i}"), &replies, 1).unwrap();
            decision.remaining() != 4
        })
        .count();
    assert_eq!(denied, 0);
    // Nor does any flood key get a request more.
    let readmitted = (0..19_200)
        .filter(|i| {
            store
                .check_text(&format!("flood{i}"), &replies, 1)
                .unwrap()
                .allowed()
        })
        .count();
    assert_eq!(readmitted, 0);
}

/// A store of 4 keys remembering 8 evicted ones, where "early" used its
/// quota at T0 (its window ends at T0 + 60 s) and 40 keys theirs at T0 +
/// 10 s (ending at T0 + 70 s).
fn flooded_past_its_bound(clock: &ManualClock, policy: &Policy) -> MemoryStore<ManualClock> {
    let store = MemoryStore::with_clock_and_shards(clock.clone(), 1)
        .with_capacity(4)
        .remember_evicted(8);
    clock.set(T0);
    assert_eq!(use_up(&store, "early", policy), 3);
    clock.set(T0 + 10 * S);
    for i in 0..40 {
        // Past 12 evicted keys, new ones may inherit merged slots: the
        // price of a flood larger than the table.
        use_up(&store, &format!("flood{i}"), policy);
        assert!(store.remembered_evicted().0 <= 8);
    }
    store
}

#[test]
fn past_its_bound_the_table_merges_what_expires_soonest() {
    let clock = ManualClock::new(T0);
    let policy = Policy::fixed_window(Rule::new(3, 60 * S).unwrap());
    let store = flooded_past_its_bound(&clock, &policy);
    // The states remembered exactly are the flood's, which all outlast
    // "early"'s: none has expired when "early"'s window is over.
    let (remembered, _) = store.remembered_evicted();
    assert!(remembered > 0);
    clock.set(T0 + 65 * S);
    store.sweep();
    assert_eq!(store.remembered_evicted().0, remembered);

    // "early" went to the slots: it inherits a merge's full count, never a
    // fresh quota.
    let store = flooded_past_its_bound(&clock, &policy);
    let early = store.check_text("early", &policy, 1).unwrap();
    assert!(!early.allowed());
    assert_eq!(early.remaining(), 0);
}

#[test]
fn long_logs_weigh_on_the_bound_as_their_entries_do() {
    let clock = ManualClock::new(T0);
    // 160 entries a full log: 1 + 160 / 16 = 11 keys' worth.
    let policy = Policy::sliding_log([Rule::new(160, 60 * S).unwrap()]).unwrap();
    let store = MemoryStore::with_clock_and_shards(clock.clone(), 1)
        .with_capacity(4)
        .remember_evicted(40);
    for i in 0..20 {
        // Past the bound, new keys may inherit merged slots (and use
        // nothing).
        use_up(&store, &format!("flood{i}"), &policy);
        // Never more than 40 keys' worth: 3 full logs.
        assert!(store.remembered_evicted().0 <= 3);
    }
    assert!(store.remembered_evicted().0 > 0);
}

#[test]
fn the_exact_table_is_freed_as_its_states_expire() {
    let clock = ManualClock::new(T0);
    let policy = Policy::gcra(Rate::per_second(1).unwrap(), 3).unwrap();
    let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(64);
    for i in 0..1_000 {
        use_up(&store, &format!("flood{i}"), &policy);
    }
    let (keys, bytes) = store.remembered_evicted();
    // 936 evicted, 8 at a time; each time the 256 are full, the 32 that
    // expire soonest go to the slots: 256 + 21 × 32 + 8 = 936 leaves 232.
    assert_eq!(keys, 232);
    assert!(bytes >= 256 * 40, "{bytes} bytes");
    // Every burst refills within 3 s: then nothing is remembered.
    clock.advance(3 * S);
    store.sweep();
    assert_eq!(store.remembered_evicted(), (0, 0));
}

/// As many live keys as the capacity fit, however they fall into the 64
/// shards: none is evicted, each keeps its state. Past the capacity the
/// store evicts (from the shard a new key falls into; a key falling into a
/// shard that holds none is let in, so the store holds at most one key a
/// shard past its capacity).
#[test]
fn as_many_keys_as_the_capacity_fit_without_eviction() {
    let clock = ManualClock::new(T0);
    let policy = Policy::gcra(Rate::new(1, 600 * S).unwrap(), 2).unwrap();
    for capacity in [64, 6_400, DEFAULT_CAPACITY] {
        let store = MemoryStore::with_clock(clock.clone()).with_capacity(capacity);
        for i in 0..capacity {
            store.check_text(&format!("k{i}"), &policy, 1).unwrap();
        }
        assert_eq!(store.len(), capacity, "capacity {capacity}");
        assert_eq!(
            store.remembered_evicted().0,
            0,
            "capacity {capacity}: none evicted"
        );
        // Each key's state is its own: its second request passes.
        for i in 0..capacity {
            let key = format!("k{i}");
            assert!(
                store.check_text(&key, &policy, 1).unwrap().allowed(),
                "{key}"
            );
        }
        for i in 0..capacity {
            store.check_text(&format!("more{i}"), &policy, 1).unwrap();
        }
        let held = store.len();
        assert!(
            held <= capacity + DEFAULT_SHARDS,
            "capacity {capacity}: {held} held"
        );
        assert!(
            store.remembered_evicted().0 > 0,
            "capacity {capacity}: evicted into the ghosts"
        );
    }
}
