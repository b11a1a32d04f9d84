//! Nanoseconds per check on the memory store, for every algorithm, with 1 key
//! and with 100,000 keys, beside governor's keyed limiter in the same run.
//!
//! Every check in the measurement is allowed (the bench counts denials and
//! panics if there is one): the allowed path writes state, so it is the one
//! worth measuring, and it is the one governor's numbers describe. How each
//! policy is kept allowing (the lab notes, `benches/LAB_NOTES.md`, section 1):
//! - the O(1) algorithms and governor run on their real clocks (the system
//!   clock of `MemoryStore::new()`, governor's default quanta clock) with
//!   bursts and limits far beyond what a run can use up, and rates slow
//!   enough that no key's state expires between two visits (expired state is
//!   swept, and the next check would measure an insert, not a check);
//! - the sliding log's state is O(limit), so huge limits would grow the log
//!   without bound during the run. It keeps the rules (10 per 60 s,
//!   20 per 120 s) instead and runs on a `ManualClock` that moves 6 s + 1 µs
//!   between two checks of the same key: every check is allowed and each
//!   key's log stays at its steady size of 19-20 entries.
//!
//! The `overhead` group measures parts the rows include: reading the system
//! clock (our rows), governor's clock (its rows), advancing the manual clock
//! (the sliding log's rows), and `Policy::validate_cost`.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use futures_util::FutureExt;
use governor::clock::{Clock as _, QuantaClock};
use governor::{Quota, RateLimiter};
use limiter_core::{Clock, Key, ManualClock, MemoryStore, Policy, Rate, Rule, Store, SystemClock};

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// The two sizes of the key space: one hot key, and 100,000 keys visited in
/// turn (tens of MB of state and keys, far more than a core's L2 cache).
const KEY_COUNTS: [usize; 2] = [1, 100_000];

/// The sliding log is allowed as long as two checks of one key are at least
/// this far apart: 10 checks then span 54.000009 s < 60 s and 20 span
/// 114.000019 s < 120 s, so at most 9 (resp. 19) earlier entries are in a window.
const SLIDING_LOG_SPACING_US: u64 = 6_000_001;

/// Keys built before the measurement, so that formatting is not measured:
/// `String`s for governor, [`Key`]s for the store, each of which hashes its
/// key's text on every check.
fn keys<K: From<String>>(count: usize) -> Vec<K> {
    (0..count).map(|i| K::from(format!("user:{i}"))).collect()
}

/// Visits the keys in turn (a bounds-checked index, the same for every row).
struct Cycle<'a, K> {
    keys: &'a [K],
    next: usize,
}

impl<'a, K> Cycle<'a, K> {
    fn new(keys: &'a [K]) -> Self {
        Self { keys, next: 0 }
    }

    fn next_key(&mut self) -> &'a K {
        let key = &self.keys[self.next];
        self.next += 1;
        if self.next == self.keys.len() {
            self.next = 0;
        }
        key
    }
}

/// One quota for GCRA, the buckets and governor: 1 per second with a burst
/// (capacity) of 2^30. A row makes fewer than 2^28 checks of a key (about
/// 6 s at 60 ns or more each), so no key comes near its burst. At one per second,
/// every check pushes the key's state a second further into the future, so
/// the state outlives the 100,000-key cycle and is never swept.
fn per_second() -> Rate {
    Rate::per_second(1).expect("a valid rate")
}
const BURST: u32 = 1 << 30;

/// Limits beyond the checks a row makes of one key in a 60 s window (about
/// 6 s of checks; a denial fails the bench), and small enough that a double weighs one request's share of a
/// microsecond of the window: at 2^40 and above the sliding window
/// counter's wait is searched over a flat estimate (see its
/// `first_passing`), which no realistic limit meets.
fn huge_rule() -> Rule {
    Rule::new(1 << 30, Duration::from_secs(60)).expect("a valid rule")
}

fn sliding_log_two_rules() -> Policy {
    Policy::sliding_log([
        Rule::new(10, Duration::from_secs(60)).expect("a valid rule"),
        Rule::new(20, Duration::from_secs(120)).expect("a valid rule"),
    ])
    .expect("a valid policy")
}

/// Measures `check` on the keys in turn; `check` answers whether it was
/// allowed. State is built before the measurement (`warm_passes` visits of
/// every key) and kept across criterion's samples. The bench fails on any
/// denial, and unless every key holds state before and after (`held` counts
/// them): only checks of existing keys on the allowed path are measured.
fn bench_check<K>(
    group: &mut Group<'_>,
    name: &str,
    keys: &[K],
    warm_passes: usize,
    mut check: impl FnMut(&K) -> bool,
    held: impl Fn() -> usize,
) {
    let mut cycle = Cycle::new(keys);
    for _ in 0..warm_passes * keys.len() {
        assert!(check(cycle.next_key()), "{name}: denied while filling");
    }
    assert_eq!(held(), keys.len(), "{name}: keys without state");
    let mut denied = 0u64;
    group.bench_function(BenchmarkId::new(name, keys.len()), |b| {
        b.iter(|| denied += u64::from(!check(black_box(cycle.next_key()))));
    });
    assert_eq!(denied, 0, "{name} with {} keys denied checks", keys.len());
    assert_eq!(held(), keys.len(), "{name}: keys swept or evicted");
}

/// A store holding every key: the default capacity (100,000 keys, split
/// evenly over 64 shards) evicts a few percent of 100,000 live keys, because
/// hashing never fills the shards evenly. Twice the keys leaves every shard room.
fn store_for<C: Clock>(clock: C, keys: usize) -> MemoryStore<C> {
    MemoryStore::with_clock(clock).with_capacity(2 * keys)
}

fn checks(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    for count in KEY_COUNTS {
        let texts: Vec<String> = keys(count);
        let keys: Vec<Key> = keys(count);

        // governor's keyed limiter with its defaults (DashMap, quanta clock).
        let one = NonZeroU32::new(1).expect("non-zero");
        let burst = NonZeroU32::new(BURST).expect("non-zero");
        let governor = RateLimiter::keyed(Quota::per_second(one).allow_burst(burst));
        bench_check(
            &mut group,
            "governor_keyed",
            &texts,
            1,
            |key| governor.check_key(key).is_ok(),
            || governor.len(),
        );
        drop(governor);

        // GCRA on the system clock, as `MemoryStore::new()` (see `store_for`).
        let gcra = Policy::gcra(per_second(), BURST.into()).expect("a valid policy");
        let store = store_for(SystemClock, count);
        bench_check(
            &mut group,
            "gcra",
            &keys,
            1,
            |key| store.check_now(key, &gcra, 1).expect("a check").allowed(),
            || store.len(),
        );
        // The same through the async `Store::check`: the memory store never
        // waits, so its future is ready at the first poll.
        let store = store_for(SystemClock, count);
        bench_check(
            &mut group,
            "gcra_async",
            &keys,
            1,
            |key| {
                store
                    .check(key, &gcra, 1)
                    .now_or_never()
                    .expect("the memory store never waits")
                    .expect("a check")
                    .allowed()
            },
            || store.len(),
        );

        // The sliding log with the two rules, on a manual clock that
        // moves by the spacing divided among the keys before every check, so
        // each key sees its checks at least SLIDING_LOG_SPACING_US apart.
        let policy = sliding_log_two_rules();
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let step = Duration::from_micros(SLIDING_LOG_SPACING_US.div_ceil(count as u64));
        let store = store_for(clock.clone(), count);
        // 20 passes bring every key's log to its steady size before measuring.
        bench_check(
            &mut group,
            "sliding_log_2_rules",
            &keys,
            20,
            |key| {
                clock.advance(step);
                store.check_now(key, &policy, 1).expect("a check").allowed()
            },
            || store.len(),
        );
        drop(store);

        let o1_policies = [
            ("fixed_window", Policy::fixed_window(huge_rule())),
            ("sliding_window", Policy::sliding_window(huge_rule())),
            (
                "token_bucket",
                Policy::token_bucket(per_second(), BURST.into()).expect("a valid policy"),
            ),
            (
                "leaky_bucket",
                Policy::leaky_bucket(per_second(), BURST.into()).expect("a valid policy"),
            ),
        ];
        for (name, policy) in o1_policies {
            let store = store_for(SystemClock, count);
            bench_check(
                &mut group,
                name,
                &keys,
                1,
                |key| store.check_now(key, &policy, 1).expect("a check").allowed(),
                || store.len(),
            );
        }
    }
    group.finish();
}

/// Parts of a check, measured alone so the rows above can be read: what
/// they pay for time (a system clock read in every row but the sliding log's
/// and governor's, a manual clock advance in the sliding log's, a quanta
/// clock read in governor's), and `Policy::validate_cost`, which every check
/// runs first.
fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("overhead");
    group.bench_function("system_clock_now", |b| {
        b.iter(|| black_box(SystemClock).now_micros());
    });
    // The clock governor's rows read (its default, a TSC-based clock).
    let quanta = QuantaClock::default();
    group.bench_function("governor_quanta_clock_now", |b| {
        b.iter(|| black_box(&quanta).now());
    });
    let clock = ManualClock::new(Duration::from_secs(1_000));
    group.bench_function("manual_clock_advance", |b| {
        b.iter(|| clock.advance(black_box(Duration::from_micros(61))));
    });
    let policies = [
        (
            "gcra",
            Policy::gcra(per_second(), BURST.into()).expect("a valid policy"),
        ),
        ("sliding_log_2_rules", sliding_log_two_rules()),
        ("fixed_window", Policy::fixed_window(huge_rule())),
    ];
    for (name, policy) in policies {
        group.bench_function(BenchmarkId::new("validate_cost", name), |b| {
            b.iter(|| black_box(&policy).validate_cost(black_box(1)).is_ok());
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // 22 rows at 2 s + 4 s instead of criterion's 3 s + 5 s: the whole run
    // takes about two and a half minutes, still millions of checks per row.
    // No plots: they only cost time here.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(4))
        .without_plots();
    targets = checks, overhead
}
criterion_main!(benches);
