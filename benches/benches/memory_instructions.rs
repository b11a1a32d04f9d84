//! The memory store's checks beside governor's keyed limiter, for counting
//! instructions with callgrind (`benches/memory_instructions.sh`):
//! deterministic where timings on a shared VM are not.
//!
//! `memory_instructions --checks N VARIANT` runs N checks of one variant
//! and exits; the script runs each variant twice (200,000 and 400,000
//! checks) and divides the difference by 200,000, so set-up and the first
//! visit of each key cancel out.
//!
//! - GCRA and governor: 1 per 10 minutes with a burst of 2^18, so no state
//!   expires in a run that valgrind slows 50× (one key past 2^18 checks is
//!   denied, alike on both sides); each on its own clock (the system's for
//!   limiter, quanta's for governor).
//! - The sliding log of the seeds' two rules (10 per 60 s, 20 per 120 s) on
//!   a clock moved by hand, 6 s + 1 µs between visits of a key: always
//!   allowed, about 20 entries a key.
//! - 1 key, or 100,000 keys visited in turn, with a capacity of 200,000 or
//!   the default (100,000).
//! - The memory store's [`Key`]s are built before the checks, as governor's
//!   `String`s are, and each check hashes its key's text, as governor's
//!   does: like for like.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::{Quota, RateLimiter};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use limiter_core::{Clock, DEFAULT_CAPACITY, Key, MemoryStore, Policy, Rate, Rule};

const BURST: u64 = 1 << 18;
const MANY: usize = 100_000;

fn gcra() -> Policy {
    Policy::gcra(Rate::new(1, Duration::from_secs(600)).unwrap(), BURST).unwrap()
}

fn two_rule_log() -> Policy {
    Policy::sliding_log([
        Rule::new(10, Duration::from_secs(60)).unwrap(),
        Rule::new(20, Duration::from_secs(120)).unwrap(),
    ])
    .unwrap()
}

fn keys<K: From<String>>(n: usize) -> Vec<K> {
    (0..n).map(|i| K::from(format!("user:{i}"))).collect()
}

fn limiter_gcra(checks: usize, keys: &[Key], capacity: usize) {
    let store = MemoryStore::new().with_capacity(capacity);
    let policy = gcra();
    for i in 0..checks {
        black_box(store.check_now(&keys[i % keys.len()], &policy, 1).unwrap());
    }
}

fn governor(checks: usize, keys: &[String]) {
    let quota = Quota::with_period(Duration::from_secs(600))
        .unwrap()
        .allow_burst(NonZeroU32::new(BURST as u32).unwrap());
    let limiter = RateLimiter::keyed(quota);
    for i in 0..checks {
        let _ = black_box(limiter.check_key(&keys[i % keys.len()]));
    }
}

/// A clock moved by hand that, unlike [`limiter_core::ManualClock`], wakes
/// no sleepers when moved: moving it costs a store, not a check's worth of
/// instructions, so only the checks are counted.
#[derive(Clone)]
struct SteppedClock(Arc<AtomicU64>);

impl Clock for SteppedClock {
    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

fn limiter_log(checks: usize, keys: &[Key], capacity: usize) {
    let clock = SteppedClock(Arc::new(AtomicU64::new(1_700_000_000_000_000)));
    let store = MemoryStore::with_clock(clock.clone()).with_capacity(capacity);
    let policy = two_rule_log();
    for i in 0..checks {
        if i % keys.len() == 0 {
            clock.0.fetch_add(6_000_001, Ordering::Relaxed);
        }
        black_box(store.check_now(&keys[i % keys.len()], &policy, 1).unwrap());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let checks: usize = args
        .iter()
        .position(|a| a == "--checks")
        .and_then(|i| args.get(i + 1))
        .map_or(200_000, |n| n.parse().expect("--checks N"));
    let variant = args.last().map(String::as_str).unwrap_or_default();
    match variant {
        "gcra_1" => limiter_gcra(checks, &keys(1), DEFAULT_CAPACITY),
        "governor_1" => governor(checks, &keys(1)),
        "gcra_100k" => limiter_gcra(checks, &keys(MANY), 2 * MANY),
        "gcra_100k_default_capacity" => limiter_gcra(checks, &keys(MANY), DEFAULT_CAPACITY),
        "governor_100k" => governor(checks, &keys(MANY)),
        "log_1" => limiter_log(checks, &keys(1), DEFAULT_CAPACITY),
        "log_100k" => limiter_log(checks, &keys(MANY), 2 * MANY),
        "log_100k_default_capacity" => limiter_log(checks, &keys(MANY), DEFAULT_CAPACITY),
        // `cargo bench` runs every bench binary with `--bench`: nothing to do.
        _ => {
            eprintln!("memory_instructions --checks N VARIANT (see benches/memory_instructions.sh)")
        }
    }
}
