//! Memory under hostile traffic:
//! - bytes per key of each algorithm in the memory store (resident memory
//!   grown by 200,000 keys, divided by 200,000) and in Redis (`MEMORY USAGE`
//!   of one key after one request);
//! - the process's peak resident memory after a flood of 1,000,000 distinct
//!   client IPs through the memory store with its default capacity.
//!
//! Each memory measurement runs in a fresh child process (this binary with
//! `--measure`), so one measurement's freed memory cannot hide another's.
//!
//! `cargo bench -p limiter-benches --bench memory_flood` (needs `redis-server`).

use std::process::Command;
use std::time::Duration;

use limiter_core::{Algorithm, MemoryStore, Policy, Rate, RedisStore, Rule, Store};

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

const ALGORITHMS: [Algorithm; 6] = [
    Algorithm::SlidingLog,
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow,
    Algorithm::TokenBucket,
    Algorithm::LeakyBucket,
    Algorithm::Gcra,
];

/// A client key as the layer builds it for `by = ip`, written into `key`.
fn write_client_key(key: &mut String, i: u32) {
    use std::fmt::Write;
    let [a, b, c, d] = (0x0A00_0000 + i).to_be_bytes();
    key.clear();
    let _ = write!(key, "rate_limit:{a}.{b}.{c}.{d}:posts-create_post");
}

fn client_key(i: u32) -> String {
    let mut key = String::new();
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

/// Child: checks `keys` distinct clients against `algorithm` in a store of
/// `capacity`, and prints the resident memory before, after and at peak.
fn measure(algorithm: &str, keys: u32, capacity: usize) {
    let policy = policy(algorithm);
    let store = MemoryStore::new().with_capacity(capacity);
    // Keys are written into one buffer, so only the store's memory grows.
    let mut key = String::with_capacity(64);
    let before = status_bytes("VmRSS:");
    for i in 0..keys {
        write_client_key(&mut key, i);
        store.check_now(&key, &policy, 1).expect("a valid check");
    }
    let after = status_bytes("VmRSS:");
    println!(
        "{before} {after} {} {}",
        status_bytes("VmHWM:"),
        store.len()
    );
}

fn child(algorithm: Algorithm, keys: u32, capacity: usize) -> (u64, u64, u64, usize) {
    let output = Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "--measure",
            algorithm.name(),
            &keys.to_string(),
            &capacity.to_string(),
        ])
        .output()
        .expect("the child runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<u64> = text
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    (numbers[0], numbers[1], numbers[2], numbers[3] as usize)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--measure") {
        measure(
            &args[i + 1],
            args[i + 2].parse().unwrap(),
            args[i + 3].parse().unwrap(),
        );
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
        let (before, after, _, live) = child(algorithm, KEYS, 2 * KEYS as usize);
        assert_eq!(live, KEYS as usize);
        let key = client_key(0);
        let policy = policy(algorithm.name());
        runtime
            .block_on(redis.check(&key, &policy, 1))
            .expect("a check");
        let usage = server.command(&["MEMORY", "USAGE", &key, "SAMPLES", "0"]);
        println!(
            "| {} | {:.0} | {} |",
            algorithm.name(),
            (after - before) as f64 / f64::from(KEYS),
            usage.trim()
        );
    }

    const FLOOD: u32 = 1_000_000;
    println!();
    println!(
        "| algorithm | distinct client IPs | keys kept (capacity {}) | peak resident memory of the process |",
        limiter_core::DEFAULT_CAPACITY
    );
    println!("|---|---:|---:|---:|");
    for algorithm in [Algorithm::SlidingLog, Algorithm::Gcra] {
        let (_, _, peak, live) = child(algorithm, FLOOD, limiter_core::DEFAULT_CAPACITY);
        println!(
            "| {} | {FLOOD} | {live} | {:.1} MiB |",
            algorithm.name(),
            peak as f64 / (1024.0 * 1024.0)
        );
    }
}
