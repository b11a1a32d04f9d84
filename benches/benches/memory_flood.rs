//! Memory and false denials under hostile traffic:
//! - bytes per key of each algorithm in the memory store (resident memory
//!   grown by 200,000 keys, divided by 200,000) and in Redis (`MEMORY USAGE`
//!   of one key after one request);
//! - the process's resident memory after a flood of 1,000,000 distinct
//!   client IPs through the memory store with its default capacity, and what
//!   the ghosts of evicted state add to it: the heap (counted by the global
//!   allocator) that sweeping every key and ghost frees, minus what it frees
//!   in a store holding as many keys that never evicted;
//! - false denials: 1,000 users, each well within their quota, interleaved
//!   with that flood; every user request goes to the flooded store and to a
//!   store that holds every key, and the bench counts the requests the
//!   flooded store denies while the other allows them.
//!
//! - new identities after a flood: 3 × the default capacity of distinct
//!   identities, each using its whole quota within a second, then 2,000
//!   identities the store has never seen (the share denied on their first
//!   request), and every flood identity again (how many are admitted beyond
//!   their limit, against a store that holds every key); and the bytes per
//!   evicted key remembered exactly.
//!
//! Each memory measurement runs in a fresh child process (this binary with
//! `--measure`), so one measurement's freed memory cannot hide another's.
//!
//! `cargo bench -p limiter-benches --bench memory_flood` (needs `redis-server`);
//! `-- --false-denials` prints the false denials' table alone,
//! `-- --new-identities` the new identities' table alone.

use std::alloc::System;
use std::process::Command;
use std::time::Duration;

use cap::Cap;

use limiter_core::{Algorithm, Key, ManualClock, MemoryStore, Policy, Rate, Rule, Store};
use limiter_redis::RedisStore;

fn policy(algorithm: &str) -> Policy {
    let minute = Duration::from_secs(60);
    let per_minute = Rate::per_minute(100).unwrap();
    match algorithm {
        // The UGC server's POST /posts: two rules and prevent_duplicate.
        "sliding_log" => Policy::sliding_log([
            Rule::new(10, minute).unwrap(),
            Rule::new(20, 2 * minute).unwrap(),
        ])
        .unwrap()
        .with_prevent_duplicate(limiter_core::DEFAULT_DUPLICATE_WINDOW)
        .unwrap(),
        "fixed_window" => Policy::fixed_window(Rule::new(100, minute).unwrap()),
        "sliding_window" => Policy::sliding_window(Rule::new(100, minute).unwrap()),
        "token_bucket" => Policy::token_bucket(per_minute, 20).unwrap(),
        "leaky_bucket" => Policy::leaky_bucket(per_minute, 20).unwrap(),
        "gcra" => Policy::gcra(per_minute, 20).unwrap(),
        other => panic!("unknown algorithm {other}"),
    }
}

/// Counts the heap in use, so ghosts can be told apart from the allocator's
/// retained pages.
#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, usize::MAX);

const ALGORITHMS: [Algorithm; 6] = Algorithm::ALL;

/// A client key as the layer builds it for `by = ip`, written into `key`.
fn write_client_key(key: &mut Key, i: u32) {
    use std::fmt::Write;
    let [a, b, c, d] = (0x0A00_0000 + i).to_be_bytes();
    let address = |text: &mut String| {
        let _ = write!(text, "{a}.{b}.{c}.{d}");
    };
    key.set("rate_limit:", address, "posts-create_post");
}

fn client_key(i: u32) -> Key {
    let mut key = Key::new();
    write_client_key(&mut key, i);
    key
}

/// `VmRSS` or `VmHWM` of this process, in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field");
    kib * 1024
}

/// What a child measured: resident memory before, after and at peak, the
/// heap the store grew by, the part of it that sweeping every key (and
/// ghost) frees, and the keys it holds.
struct Measured {
    before: u64,
    after: u64,
    peak: u64,
    heap: u64,
    swept: u64,
    live: usize,
}

/// Child: checks the distinct clients `keys` against `algorithm` in a store
/// of `capacity`, all at one instant, and prints what it measured.
fn measure(algorithm: &str, keys: std::ops::Range<u32>, capacity: usize) {
    let policy = policy(algorithm);
    // Keys are written into one buffer, so only the store's memory grows.
    let mut key = Key::new();
    let (before, heap_before) = (status_bytes("VmRSS:"), HEAP.allocated());
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let store = MemoryStore::with_clock(clock.clone()).with_capacity(capacity);
    for i in keys {
        write_client_key(&mut key, i);
        store.check_now(&key, &policy, 1).expect("a valid check");
    }
    let after = status_bytes("VmRSS:");
    let heap = HEAP.allocated() - heap_before;
    let live = store.len();
    // Every window has passed: what goes is the keys, their state and the
    // ghosts; what stays is the tables' buckets.
    clock.advance(Duration::from_secs(86_400));
    store.sweep();
    let swept = heap - (HEAP.allocated() - heap_before);
    println!(
        "{before} {after} {} {heap} {swept} {live}",
        status_bytes("VmHWM:")
    );
}

fn child(algorithm: Algorithm, keys: std::ops::Range<u32>, capacity: usize) -> Measured {
    let output = Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "--measure",
            algorithm.name(),
            &keys.start.to_string(),
            &keys.end.to_string(),
            &capacity.to_string(),
        ])
        .output()
        .expect("the child runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<u64> = text
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    Measured {
        before: numbers[0],
        after: numbers[1],
        peak: numbers[2],
        heap: numbers[3],
        swept: numbers[4],
        live: numbers[5] as usize,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--measure") {
        measure(
            &args[i + 1],
            args[i + 2].parse().unwrap()..args[i + 3].parse().unwrap(),
            args[i + 4].parse().unwrap(),
        );
        return;
    }
    if args.iter().any(|a| a == "--false-denials") {
        print_false_denials();
        return;
    }
    if args.iter().any(|a| a == "--new-identities") {
        print_new_identities();
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let server = limiter_tests::RedisServer::start();
    let redis = runtime
        .block_on(RedisStore::connect(&server.url()))
        .expect("Redis");

    const KEYS: u32 = 200_000;
    println!("| algorithm | memory store, bytes per key | Redis, bytes per key (`MEMORY USAGE`) |");
    println!("|---|---:|---:|");
    for algorithm in ALGORITHMS {
        // Capacity above the key count: nothing is evicted, every key lives.
        let measured = child(algorithm, 0..KEYS, 2 * KEYS as usize);
        assert_eq!(measured.live, KEYS as usize);
        let key = client_key(0);
        let policy = policy(algorithm.name());
        runtime
            .block_on(redis.check(&key, &policy, 1))
            .expect("a check");
        let usage = server.command(&["MEMORY", "USAGE", key.as_str(), "SAMPLES", "0"]);
        println!(
            "| {} | {:.0} | {} |",
            algorithm.name(),
            (measured.after - measured.before) as f64 / f64::from(KEYS),
            usage.trim()
        );
    }

    println!();
    println!(
        "| algorithm | distinct client IPs | keys kept (capacity {}) | peak resident memory of the process | heap held by the store | of which ghosts | heap of as many keys, never evicted |",
        limiter_core::DEFAULT_CAPACITY
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for algorithm in ALGORITHMS {
        let flooded = child(algorithm, 0..FLOOD, limiter_core::DEFAULT_CAPACITY);
        let live = flooded.live;
        // The flood's last clients: about those it kept.
        let plain = child(algorithm, FLOOD - live as u32..FLOOD, 2 * live);
        assert_eq!(plain.live, live);
        // Both free their keys and state when swept; the flooded store also
        // frees its ghosts.
        println!(
            "| {} | {FLOOD} | {live} | {} | {} | {} | {} |",
            algorithm.name(),
            mib(flooded.peak),
            mib(flooded.heap),
            mib(flooded.swept - plain.swept),
            mib(plain.heap),
        );
    }
    print_false_denials();
    print_new_identities();
}

/// Identities of the flood, then new ones: 3 × the default capacity.
const IDENTITY_FLOOD: u32 = 3 * limiter_core::DEFAULT_CAPACITY as u32;
const NEW_IDENTITIES: u32 = 2_000;

fn print_new_identities() {
    println!();
    println!(
        "| algorithm | flood: identities using their whole quota | new identities denied on their first request | flood identities admitted beyond their limit on return | evicted keys remembered exactly | bytes per remembered key |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for algorithm in ALGORITHMS {
        let policy = policy(algorithm.name());
        let start = Duration::from_secs(1_000_020);
        let clock = ManualClock::new(start);
        let store = MemoryStore::with_clock(clock.clone());
        let everything = MemoryStore::with_clock(clock.clone()).with_capacity(usize::MAX / 2);
        let mut key = Key::new();
        for i in 0..IDENTITY_FLOOD {
            // The flood lasts one second.
            clock.set(
                start + Duration::from_micros(u64::from(i) * 1_000_000 / u64::from(IDENTITY_FLOOD)),
            );
            write_client_key(&mut key, i);
            while store.check_now(&key, &policy, 1).unwrap().allowed() {
                assert!(everything.check_now(&key, &policy, 1).unwrap().allowed());
            }
            assert!(!everything.check_now(&key, &policy, 1).unwrap().allowed());
        }
        let (remembered, bytes) = store.remembered_evicted();
        clock.set(start + Duration::from_secs(1));
        let denied = (0..NEW_IDENTITIES)
            .filter(|&i| {
                write_client_key(&mut key, 100_000_000 + i);
                !store.check_now(&key, &policy, 1).unwrap().allowed()
            })
            .count();
        let beyond = (0..IDENTITY_FLOOD)
            .filter(|&i| {
                write_client_key(&mut key, i);
                let flooded = store.check_now(&key, &policy, 1).unwrap().allowed();
                let held = everything.check_now(&key, &policy, 1).unwrap().allowed();
                flooded && !held
            })
            .count();
        println!(
            "| {} | {IDENTITY_FLOOD} in 1 s | {denied} of {NEW_IDENTITIES} ({:.2}%) | {beyond} | {remembered} | {:.0} |",
            algorithm.name(),
            100.0 * denied as f64 / f64::from(NEW_IDENTITIES),
            bytes as f64 / remembered.max(1) as f64,
        );
    }
}

fn print_false_denials() {
    println!();
    println!(
        "| algorithm | flood: distinct keys over | user requests | allowed by a store holding every key | denied only under the flood | users affected | longest retry after of those |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for algorithm in ALGORITHMS {
        for (flood, flood_seconds) in FLOODS {
            let report = false_denials(algorithm, flood, flood_seconds);
            println!(
                "| {} | {flood} over {flood_seconds} s | {} | {} | {} | {} | {:.1} s |",
                algorithm.name(),
                report.requests,
                report.allowed,
                report.false_denials,
                report.users_affected,
                report.longest_retry.as_secs_f64(),
            );
        }
    }
}

const FLOOD: u32 = 1_000_000;
/// Floods of distinct clients, one request each, and how long they last.
const FLOODS: [(u32, u64); 4] = [(FLOOD, 120), (FLOOD, 10), (FLOOD, 1), (10 * FLOOD, 60)];
/// How long the users are followed: the flood, then until its state expires.
const SIMULATED_SECONDS: u64 = 240;
const USERS: u32 = 1_000;
/// Each user comes back this often, so the flood evicts it in between.
const USER_INTERVAL_MS: u64 = 15_000;

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// How many requests a user sends each time: well within every quota
/// (one for the sliding log, whose prevent-duplicate rule allows one per
/// 5 s; five, of 100 per minute and bursts of 20, for the others).
fn user_burst(algorithm: Algorithm) -> u64 {
    match algorithm {
        Algorithm::SlidingLog => 1,
        _ => 5,
    }
}

#[derive(Default)]
struct FalseDenials {
    requests: u64,
    allowed: u64,
    false_denials: u64,
    users_affected: usize,
    longest_retry: Duration,
}

/// Interleaves the users with a flood of `flood` keys lasting `flood_seconds`, on simulated
/// time (each check is given its instant), through a store of the default
/// capacity and through one that holds every user.
fn false_denials(algorithm: Algorithm, flood: u32, flood_seconds: u64) -> FalseDenials {
    let policy = policy(algorithm.name());
    let t0: u64 = 1_750_000_000_000_000;
    let clock = ManualClock::new(Duration::from_micros(t0));
    let flooded = MemoryStore::with_clock(clock.clone());
    let holds_all = MemoryStore::with_clock(clock.clone()).with_capacity(10 * USERS as usize);
    let flood_ms = flood_seconds * 1_000;
    let mut report = FalseDenials::default();
    let mut affected = std::collections::HashSet::new();
    let mut key = Key::new();
    for ms in 0..SIMULATED_SECONDS * 1_000 {
        clock.set(Duration::from_micros(t0 + ms * 1_000));
        if ms < flood_ms {
            // Client i comes at i · flood_ms / flood.
            let first = ms * u64::from(flood) / flood_ms;
            let last = (ms + 1) * u64::from(flood) / flood_ms;
            for client in first..last {
                write_client_key(&mut key, USERS + client as u32);
                flooded.check_now(&key, &policy, 1).expect("a valid check");
            }
        }
        // User u comes at u · interval / USERS into each interval.
        let slot = ms % USER_INTERVAL_MS;
        let first = (slot * u64::from(USERS)).div_ceil(USER_INTERVAL_MS);
        let last = ((slot + 1) * u64::from(USERS)).div_ceil(USER_INTERVAL_MS);
        for user in first..last.min(u64::from(USERS)) {
            write_client_key(&mut key, user as u32);
            for _ in 0..user_burst(algorithm) {
                let got = flooded.check_now(&key, &policy, 1).expect("a valid check");
                let expected = holds_all
                    .check_now(&key, &policy, 1)
                    .expect("a valid check");
                report.requests += 1;
                report.allowed += u64::from(expected.allowed());
                if expected.allowed() && !got.allowed() {
                    report.false_denials += 1;
                    affected.insert(user);
                    let retry = got.retry_after().unwrap_or_default();
                    report.longest_retry = report.longest_retry.max(retry);
                }
            }
        }
    }
    report.users_affected = affected.len();
    report
}
