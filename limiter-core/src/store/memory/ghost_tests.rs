//! What evicted keys get back: each algorithm's state, exactly from a slot
//! of its own, conservatively from a merged one, compared decision by
//! decision with a twin store that never evicts. The bounded store here
//! remembers no evicted key exactly, so that every eviction goes to the
//! coarse slots these tests are about; `remembered_tests` covers the exact
//! table in front of them.

use std::time::Duration;

use super::*;
use crate::{ManualClock, Rate, Rule};

/// A multiple of 60 s, so sliding windows of 60 s start at T0.
pub(super) const T0: Duration = Duration::from_secs(1_020);
pub(super) const S: Duration = Duration::from_secs(1);
/// Room for this many keys in the bounded store's one shard, and as many ghost slots.
const CAPACITY: usize = 4;

/// A store with room for `CAPACITY` keys, and its twin with room for all,
/// on one clock.
struct Twins {
    clock: ManualClock,
    bounded: MemoryStore<ManualClock>,
    twin: MemoryStore<ManualClock>,
}

impl Twins {
    fn new() -> Self {
        let clock = ManualClock::new(T0);
        Self {
            bounded: MemoryStore::with_clock_and_shards(clock.clone(), 1)
                .with_capacity(CAPACITY)
                .remember_evicted(0),
            twin: MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(1 << 20),
            clock,
        }
    }

    /// The twins at T0 + `secs` seconds.
    fn at(&self, secs: u64) -> &Self {
        self.clock.set(T0 + Duration::from_secs(secs));
        self
    }

    /// The decisions of the bounded store and of the twin.
    fn check(&self, key: &str, policy: &Policy, cost: u64) -> (Decision, Decision) {
        (
            self.bounded.check_text(key, policy, cost).unwrap(),
            self.twin.check_text(key, policy, cost).unwrap(),
        )
    }

    /// Floods the bounded store with `2 · CAPACITY` new keys of `policy`,
    /// one request each, whose ghost slot is `key`'s (`same_slot`) or not,
    /// so that `key` (the least recently used) is evicted.
    ///
    /// With `same_slot`, the first three keys start afresh, the fourth evicts
    /// `key` into the slot, the fifth finds `key`'s exact state there (not
    /// its own: it starts afresh) and evicts the first, which is merged with
    /// `key`; the last three inherit that merge and are still live when the
    /// flood ends. So the slot holds `key`'s state merged with one fresh
    /// key's.
    fn flood(&self, key: &str, policy: &Policy, same_slot: bool) {
        let slot = self.bounded.ghost_slot(key, CAPACITY);
        let keys = (0..)
            .map(|i| format!("{key}-flood{i}"))
            .filter(|k| (self.bounded.ghost_slot(k, CAPACITY) == slot) == same_slot)
            .take(2 * CAPACITY);
        for flood in keys {
            self.bounded.check_text(&flood, policy, 1).unwrap();
        }
        assert!(!self.bounded.holds(key), "{key} was evicted");
    }
}

/// One policy of each algorithm, each allowing 3 at once.
pub(super) fn six_policies() -> [Policy; 6] {
    let every_10s = Rate::new(1, 10 * S).unwrap();
    [
        Policy::sliding_log([
            Rule::new(3, 60 * S).unwrap(),
            Rule::new(5, 120 * S).unwrap(),
        ])
        .unwrap(),
        Policy::fixed_window(Rule::new(3, 60 * S).unwrap()),
        Policy::sliding_window(Rule::new(3, 60 * S).unwrap()),
        Policy::token_bucket(every_10s, 3).unwrap(),
        Policy::leaky_bucket(every_10s, 3).unwrap(),
        Policy::gcra(every_10s, 3).unwrap(),
    ]
}

#[test]
fn an_evicted_key_gets_its_own_state_back_exactly() {
    for policy in six_policies() {
        let name = policy.algorithm();
        let twins = Twins::new();
        for base in [0, 1_000] {
            for (since_t0, cost) in [(base, 2), (base + 1, 1)] {
                let (bounded, twin) = twins.at(since_t0).check("k", &policy, cost);
                assert_eq!(bounded, twin, "{name}, at T0 + {since_t0} s");
            }
            // Other keys fill the store and evict "k", away from its ghost slot.
            twins.flood("k", &policy, false);
            for since in [2, 2, 2, 25, 45, 61, 61, 95, 121, 400] {
                let since_t0 = base + since;
                let (bounded, twin) = twins.at(since_t0).check("k", &policy, 1);
                assert_eq!(bounded, twin, "{name}, at T0 + {since_t0} s");
            }
        }
    }
}

/// A decision's allowed, remaining, and retry after in whole seconds.
type Seen = (bool, u64, Option<u64>);

/// Asserts what each step (seconds after T0) sees on the bounded store and
/// on the twin.
#[track_caller]
fn assert_steps(twins: &Twins, policy: &Policy, steps: &[(u64, Seen, Seen)]) {
    let seen = |d: Decision| {
        (
            d.allowed(),
            d.remaining(),
            d.retry_after().map(|r| r.as_secs()),
        )
    };
    for &(since_t0, bounded, twin) in steps {
        let decisions = twins.at(since_t0).check("k", policy, 1);
        let what = format!("{}, at T0 + {since_t0} s", policy.algorithm());
        assert_eq!(
            (seen(decisions.0), seen(decisions.1)),
            (bounded, twin),
            "{what}"
        );
    }
}

/// After every window and ghost has passed, the key starts afresh.
#[track_caller]
fn assert_starts_afresh(twins: &Twins, policy: &Policy) {
    let (bounded, twin) = twins.at(1_000).check("k", policy, 1);
    assert_eq!(bounded, twin);
    assert_eq!(
        bounded,
        twins.twin.check_text("never-seen", policy, 1).unwrap()
    );
}

#[test]
fn a_sliding_log_merged_with_one_request_logs_loses_one_request_at_most() {
    let policy = Policy::sliding_log([Rule::new(3, 60 * S).unwrap()]).unwrap();
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 2);
    // Keys of one request each, at T0 + 10 s, share "k"'s ghost slot: the
    // merge is [T0, T0 + 10 s] where "k" had [T0, T0].
    twins.at(10).flood("k", &policy, true);
    assert_steps(
        &twins,
        &policy,
        &[
            (20, (true, 0, None), (true, 0, None)),
            (20, (false, 0, Some(40)), (false, 0, Some(40))),
            (60, (true, 0, None), (true, 1, None)),
            // The flood's entry at T0 + 10 s counts until T0 + 70 s.
            (60, (false, 0, Some(10)), (true, 0, None)),
            (70, (true, 0, None), (false, 0, Some(10))),
        ],
    );
    assert_starts_afresh(&twins, &policy);
}

#[test]
fn a_sliding_log_merged_with_shorter_windows_denies_nothing_past_its_own() {
    let policy = Policy::sliding_log([Rule::new(3, 60 * S).unwrap()]).unwrap();
    let duplicates = Policy::sliding_log([Rule::new(1, 5 * S).unwrap()]).unwrap();
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 2);
    // The merge [T0, T0 + 10 s] expires at T0 + 60 s: no entry of "k" can be
    // later than T0, so the inherited log is [T0, T0], exactly its own.
    twins.at(10).flood("k", &duplicates, true);
    assert_steps(
        &twins,
        &policy,
        &[
            (20, (true, 0, None), (true, 0, None)),
            (20, (false, 0, Some(40)), (false, 0, Some(40))),
            (60, (true, 1, None), (true, 1, None)),
        ],
    );
}

#[test]
fn a_fixed_window_merged_with_others_restarts_with_the_largest_count() {
    let policy = Policy::fixed_window(Rule::new(3, 60 * S).unwrap());
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 2);
    twins.at(10).flood("k", &policy, true);
    assert_steps(
        &twins,
        &policy,
        &[
            // "k"'s count of 2 in a window restarted at T0 + 20 s: its own
            // window, from T0, and this one hold 3 together.
            (20, (true, 0, None), (true, 0, None)),
            (60, (false, 0, Some(20)), (true, 2, None)),
            (80, (true, 2, None), (true, 1, None)),
            (80, (true, 1, None), (true, 0, None)),
        ],
    );
    assert_starts_afresh(&twins, &policy);
}

#[test]
fn sliding_window_counters_merge_window_by_window() {
    let policy = Policy::sliding_window(Rule::new(3, 60 * S).unwrap());
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 2);
    // At T0 + 70 s "k" has 2 in the previous window; the flood 1 in the
    // current one: the merge counts both.
    twins.at(70).flood("k", &policy, true);
    assert_steps(
        &twins,
        &policy,
        &[
            // 2 · 40/60 + 1 + 1 > 3; passes at T0 + 90 s, when 2 · 30/60 + 2 = 3.
            (80, (false, 0, Some(10)), (true, 0, None)),
            (80, (false, 0, Some(10)), (false, 0, Some(10))),
            (90, (true, 0, None), (true, 0, None)),
        ],
    );
    assert_starts_afresh(&twins, &policy);
}

#[test]
fn sliding_window_counters_of_other_lengths_merge_into_the_whole_limit() {
    let policy = Policy::sliding_window(Rule::new(3, 60 * S).unwrap());
    let half_minute = Policy::sliding_window(Rule::new(3, 30 * S).unwrap());
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 1);
    twins.at(10).flood("k", &half_minute, true);
    assert_steps(
        &twins,
        &policy,
        &[
            // The merge lasts until T0 + 120 s, two of "k"'s windows: the whole
            // limit in both; 3 · 40/60 + 1 <= 3 at T0 + 80 s.
            (20, (false, 0, Some(60)), (true, 1, None)),
            (80, (true, 0, None), (true, 0, None)),
        ],
    );
    assert_starts_afresh(&twins, &policy);
}

#[test]
fn a_bucket_merged_with_others_is_as_full_as_one_that_empties_when_they_all_do() {
    let every_10s = Rate::new(1, 10 * S).unwrap();
    for policy in [
        Policy::token_bucket(every_10s, 3).unwrap(),
        Policy::leaky_bucket(every_10s, 3).unwrap(),
    ] {
        let twins = Twins::new();
        twins.at(0).check("k", &policy, 2);
        // "k" empties at T0 + 20 s; the flood, one token each at T0 + 15 s,
        // at T0 + 25 s: "k" inherits one token where it had half of one.
        twins.at(15).flood("k", &policy, true);
        assert_steps(
            &twins,
            &policy,
            &[
                (15, (true, 1, None), (true, 1, None)),
                (15, (true, 0, None), (true, 0, None)),
                (15, (false, 0, Some(10)), (false, 0, Some(5))),
                (25, (true, 0, None), (true, 0, None)),
            ],
        );
        assert_starts_afresh(&twins, &policy);
    }
}

#[test]
fn gcra_merged_with_others_keeps_the_latest_arrival_time() {
    let policy = Policy::gcra(Rate::new(1, 10 * S).unwrap(), 3).unwrap();
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 2);
    // "k"'s TAT is T0 + 20 s, the flood's T0 + 25 s.
    twins.at(15).flood("k", &policy, true);
    assert_steps(
        &twins,
        &policy,
        &[
            (15, (true, 1, None), (true, 1, None)),
            (15, (true, 0, None), (true, 0, None)),
            (15, (false, 0, Some(10)), (false, 0, Some(5))),
        ],
    );
    assert_starts_afresh(&twins, &policy);
}

#[test]
fn gcra_merged_with_a_slower_policy_is_at_worst_a_used_up_burst() {
    let policy = Policy::gcra(Rate::new(1, 10 * S).unwrap(), 3).unwrap();
    let slow = Policy::gcra(Rate::new(1, 60 * S).unwrap(), 1).unwrap();
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 2);
    // The merge's TAT is T0 + 75 s, but "k"'s own was at most now + 30 s
    // (its burst used up): it waits one interval, not for the slow policy.
    twins.at(15).flood("k", &slow, true);
    assert_steps(
        &twins,
        &policy,
        &[
            (15, (false, 0, Some(10)), (true, 1, None)),
            (24, (false, 0, Some(1)), (true, 1, None)),
            (25, (true, 0, None), (true, 0, None)),
        ],
    );
}

#[test]
fn a_key_reused_with_another_algorithm_after_eviction_starts_fresh() {
    let log = Policy::sliding_log([Rule::new(2, 60 * S).unwrap()]).unwrap();
    let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 3).unwrap();
    let gcra = Policy::gcra(Rate::per_second(1).unwrap(), 3).unwrap();
    let twins = Twins::new();
    twins.at(0).check("k", &log, 2);
    // GCRA keys evict "k": its log is the only ghost of the log table.
    twins.flood("k", &gcra, true);
    let (bounded, twin) = twins.check("k", &bucket, 1);
    assert_eq!((bounded, bounded.remaining()), (twin, 2));
    // Back to the log: the twin dropped the log when the bucket came; so
    // did the ghost.
    let (bounded, twin) = twins.check("k", &log, 1);
    assert_eq!((bounded, bounded.remaining()), (twin, 1));
}

#[test]
fn ghosts_are_not_keys_and_go_when_they_expire() {
    let policy = Policy::gcra(Rate::per_second(1).unwrap(), 3).unwrap();
    let twins = Twins::new();
    twins.at(0).check("k", &policy, 3);
    twins.flood("k", &policy, true);
    // "k" and four flood keys were evicted, all into one slot.
    assert_eq!(
        (twins.bounded.len(), twins.bounded.live_ghosts()),
        (CAPACITY, 1)
    );
    // Every state there ends by T0 + 3 s ("k"'s burst refilled; the flood
    // keys inherited it).
    twins.at(3).bounded.sweep();
    assert_eq!((twins.bounded.len(), twins.bounded.live_ghosts()), (0, 0));
}
