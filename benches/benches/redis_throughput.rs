//! Redis throughput: decisions per second through one shared `RedisStore`
//! (as shipped: checks meeting a call in flight batched) beside a bare
//! redis-rs EVALSHA of the very same script, at 1, 16, 64 and 256
//! concurrent tasks; then the Redis-side cost of one call of each
//! algorithm's script (`INFO commandstats`, a store sending a call per
//! check).
//!
//! Starts its own `redis-server` (the test harness) and prints markdown.
//! Run with `cargo bench -p limiter-benches --bench redis_throughput`; see
//! BENCHMARKS.md for how to read it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use limiter_benches::{evalsha_field, thousands};
use limiter_core::{Algorithm, Key, Policy, Rate, Rule, Store};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Script};

/// Concurrent tasks, all sharing one connection.
const LEVELS: [usize; 4] = [1, 16, 64, 256];
/// Unmeasured run of each side before a level's measurement.
const WARM_UP: Duration = Duration::from_millis(500);
/// Each side is measured for `SLICES` slices of `SLICE` (3 s in all),
/// alternating which side goes first, so a burst of load from another
/// process on a shared machine falls on both sides rather than on one.
const SLICE: Duration = Duration::from_millis(500);
const SLICES: usize = 6;
/// Checks of one key before a task moves to a fresh one: every check is
/// allowed under the issue's rules (10 per 60 s), and the log stays at the
/// size a rate-limited client's has, instead of growing for the whole run.
const CHECKS_PER_KEY: u64 = 10;
/// Checks counted by `INFO commandstats` per script.
const STAT_CHECKS: u64 = 100_000;
/// Tasks issuing those checks (the server-side cost does not depend on it).
const STAT_TASKS: u64 = 16;
/// Our sliding log and the plain yardstick are measured this many times,
/// alternately; the median is reported.
const STAT_ROUNDS: usize = 3;
const _: () = assert!(STAT_CHECKS.is_multiple_of(STAT_TASKS));

/// The issue's two rules, 10 per 60 s and 20 per 120 s: (limit, window in µs).
/// A fresh key every `CHECKS_PER_KEY` checks keeps every check allowed.
const RULES: [(u64, u64); 2] = [(10, 60_000_000), (20, 120_000_000)];

/// A plain two-rule sliding log, the usual shape of such scripts (server
/// time, trim, count, add, expire; no retry time, no per-rule status), with
/// the same ARGV layout as ours. Not used by the library: a yardstick for our
/// script's Redis-side cost on the same machine in the same run.
const PLAIN_SLIDING_LOG: &str = r#"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - tonumber(ARGV[9]))
local short = redis.call('ZCOUNT', key, now - tonumber(ARGV[7]) + 1, now)
local long = redis.call('ZCARD', key)
if short < tonumber(ARGV[6]) and long < tonumber(ARGV[8]) then
  redis.call('ZADD', key, now, now .. '-' .. long)
  redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[9]) / 1000))
  return {1}
end
return {0}
"#;

fn two_rule_sliding_log() -> Policy {
    Policy::sliding_log(
        RULES.map(|(limit, us)| Rule::new(limit, Duration::from_micros(us)).expect("a rule")),
    )
    .expect("a policy")
}

/// One of the two ways to run the sliding log script.
#[derive(Clone)]
enum Side {
    /// Through the library: `RedisStore::check`.
    Store(RedisStore, Arc<Policy>),
    /// redis-rs alone: `Script::invoke_async` (EVALSHA) of the same source,
    /// with the arguments the store sends, the reply read as the store reads it.
    /// The last field is the reply's first number when the check is allowed.
    Bare(MultiplexedConnection, Arc<Script>, i64),
}

impl Side {
    /// Checks `key`; answers whether the request was allowed.
    async fn check(&mut self, key: &str) -> bool {
        match self {
            Side::Store(store, policy) => store
                .check(&Key::from(key), policy, 1)
                .await
                .unwrap_or_else(|e| panic!("store check failed: {e}"))
                .allowed(),
            Side::Bare(connection, script, allowed) => {
                let mut call = script.key(key);
                // ARGV: "" (the server's time), cost, the key's TTL in ms (the
                // longest window), the longest window, rule count, then
                // (limit, window) pairs.
                let longest = RULES.iter().map(|rule| rule.1).max().expect("rules");
                call.arg("")
                    .arg(1u64)
                    .arg(longest / 1000)
                    .arg(longest)
                    .arg(RULES.len());
                for (limit, window_us) in RULES {
                    call.arg(limit).arg(window_us);
                }
                let reply: Vec<i64> = call
                    .invoke_async(connection)
                    .await
                    .unwrap_or_else(|e| panic!("bare EVALSHA failed: {e}"));
                reply.first() == Some(allowed)
            }
        }
    }
}

/// Runs `tasks` tasks checking as fast as they can for `duration`; returns
/// how many decisions they made and how long that took (until the last
/// in-flight check of every task returned). Panics if one is denied.
async fn run(side: &Side, tasks: usize, duration: Duration) -> (u64, Duration) {
    // Every run uses keys no earlier run touched.
    static RUN: AtomicU64 = AtomicU64::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let mut side = side.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut key = String::new();
                while !stop.load(Ordering::Relaxed) {
                    if done.is_multiple_of(CHECKS_PER_KEY) {
                        key = format!("bench:{run}:{task}:{}", done / CHECKS_PER_KEY);
                    }
                    assert!(side.check(&key).await, "{key} was denied");
                    done += 1;
                }
                done
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut decisions = 0;
    for handle in handles {
        decisions += handle.await.expect("a benchmark task");
    }
    (decisions, start.elapsed())
}

/// Decisions per second of the store and of the bare script at `tasks`.
async fn level(store: &Side, bare: &Side, tasks: usize) -> (f64, f64) {
    run(store, tasks, WARM_UP).await;
    run(bare, tasks, WARM_UP).await;
    let (mut store_total, mut bare_total) = ((0, Duration::ZERO), (0, Duration::ZERO));
    for slice in 0..SLICES {
        let add = |total: &mut (u64, Duration), (n, t): (u64, Duration)| {
            total.0 += n;
            total.1 += t;
        };
        if slice % 2 == 0 {
            add(&mut store_total, run(store, tasks, SLICE).await);
            add(&mut bare_total, run(bare, tasks, SLICE).await);
        } else {
            add(&mut bare_total, run(bare, tasks, SLICE).await);
            add(&mut store_total, run(store, tasks, SLICE).await);
        }
    }
    let rate = |(n, t): (u64, Duration)| n as f64 / t.as_secs_f64();
    (rate(store_total), rate(bare_total))
}

/// `STAT_CHECKS` allowed checks through `side` after a `CONFIG RESETSTAT`;
/// returns `cmdstat_evalsha`'s usec_per_call: the time Redis spent running
/// the script, per call (its own wall clock, so CPU contention inflates it).
async fn server_cost(side: &Side, admin: &mut MultiplexedConnection) -> f64 {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    // Loads the script (NOSCRIPT, SCRIPT LOAD) before the statistics start.
    assert!(side.clone().check(&format!("stat:{run}:warm")).await);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(admin)
        .await
        .expect("CONFIG RESETSTAT");
    let handles: Vec<_> = (0..STAT_TASKS)
        .map(|task| {
            let mut side = side.clone();
            tokio::spawn(async move {
                let mut key = String::new();
                for i in 0..STAT_CHECKS / STAT_TASKS {
                    if i.is_multiple_of(CHECKS_PER_KEY) {
                        key = format!("stat:{run}:{task}:{}", i / CHECKS_PER_KEY);
                    }
                    assert!(side.check(&key).await, "{key} was denied");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("a benchmark task");
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .expect("INFO commandstats");
    let field = |name: &str| {
        evalsha_field(&info, name).unwrap_or_else(|| panic!("no evalsha {name} in {info}"))
    };
    assert_eq!(field("calls"), STAT_CHECKS.to_string(), "{info}");
    assert_eq!(field("failed_calls"), "0", "{info}");
    field("usec_per_call").parse().expect("a number")
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

// One worker thread: redis-server is single-threaded, so on a two-core
// machine the client gets one core and the server the other. With a worker
// per core, the client's threads can preempt the server in the middle of
// scripts, and the bench would measure that contention instead of the store.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let server = RedisServer::start();
    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&server.url(), config.clone())
        .await
        .expect("connect the store");
    // A call per check, for the cost of one call (section 3).
    let direct = RedisStore::connect_with(&server.url(), config.coalesce(false))
        .await
        .expect("connect the store");
    // Its subscription's first reading of the shared tables (two calls of
    // their scripts) done before any statistics are read.
    assert!(direct.synced(Duration::from_secs(5)).await);
    let client = Client::open(server.url()).expect("a URL");
    let raw_config =
        AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
    let raw = client
        .get_multiplexed_async_connection_with_config(&raw_config)
        .await
        .expect("connect redis-rs");
    let mut admin = client
        .get_multiplexed_async_connection_with_config(&raw_config)
        .await
        .expect("connect redis-rs");
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut admin)
        .await
        .expect("INFO server");
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    println!(
        "redis-server {version}, {cores} cores, tokio runtime with {workers} worker thread(s)"
    );
    println!(
        "two-rule sliding log, limits {} / {}, a fresh key every {CHECKS_PER_KEY} checks (never denied)",
        RULES[0].0, RULES[1].0
    );
    println!(
        "each level: {WARM_UP:?} warm-up per side, then {SLICES} alternating slices of {SLICE:?} per side\n"
    );

    // Both sides share one connection each: the store's (one multiplexed
    // connection, held by its link) and redis-rs's MultiplexedConnection.
    let policy = two_rule_sliding_log();
    let store_side = Side::Store(store.clone(), Arc::new(policy.clone()));
    let script = Script::new(RedisStore::script_source(Algorithm::SlidingLog));
    // Our sliding log's reply starts with the retry time, -1 when allowed.
    let bare_side = Side::Bare(raw.clone(), Arc::new(script), -1);

    println!("| concurrency | store decisions/s | bare EVALSHA/s | store / bare |");
    println!("|---:|---:|---:|---:|");
    for tasks in LEVELS {
        let (store_rate, bare_rate) = level(&store_side, &bare_side, tasks).await;
        println!(
            "| {tasks} | {} | {} | {:.1}% |",
            thousands(store_rate),
            thousands(bare_rate),
            100.0 * store_rate / bare_rate
        );
    }

    println!(
        "\nRedis-side cost per allowed check (cmdstat_evalsha usec_per_call over {STAT_CHECKS} checks):\n"
    );
    println!("| script | usec_per_call | runs |");
    println!("|---|---:|---|");
    // Our script and the plain yardstick, alternately: their ratio is the
    // figure that survives a noisy machine.
    let ours = Side::Store(direct.clone(), Arc::new(policy));
    let plain = Side::Bare(raw, Arc::new(Script::new(PLAIN_SLIDING_LOG)), 1);
    let (mut ours_us, mut plain_us) = (Vec::new(), Vec::new());
    for round in 0..STAT_ROUNDS {
        if round % 2 == 0 {
            ours_us.push(server_cost(&ours, &mut admin).await);
            plain_us.push(server_cost(&plain, &mut admin).await);
        } else {
            plain_us.push(server_cost(&plain, &mut admin).await);
            ours_us.push(server_cost(&ours, &mut admin).await);
        }
    }
    let runs = |v: &[f64]| {
        v.iter()
            .map(|us| format!("{us:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (ours_median, plain_median) = (median(ours_us.clone()), median(plain_us.clone()));
    println!(
        "| sliding_log, 2 rules (ours) | {ours_median:.2} | {} |",
        runs(&ours_us)
    );
    println!(
        "| plain 2-rule sliding log (yardstick, not the library's) | {plain_median:.2} | {} |",
        runs(&plain_us)
    );

    // The other algorithms, once each, for information. Rates of one per
    // second with bursts of 2^30 never deny and keep every key's state alive
    // between its checks (the state of a faster rate would expire at once).
    let per_second = Rate::per_second(1).expect("a rate");
    let huge = Rule::new(1 << 40, Duration::from_secs(60)).expect("a rule");
    let burst = 1 << 30;
    let others = [
        ("fixed_window", Policy::fixed_window(huge)),
        ("sliding_window", Policy::sliding_window(huge)),
        (
            "token_bucket",
            Policy::token_bucket(per_second, burst).expect("a policy"),
        ),
        (
            "leaky_bucket",
            Policy::leaky_bucket(per_second, burst).expect("a policy"),
        ),
        ("gcra", Policy::gcra(per_second, burst).expect("a policy")),
    ];
    for (name, policy) in others {
        let side = Side::Store(direct.clone(), Arc::new(policy));
        let us = server_cost(&side, &mut admin).await;
        println!("| {name} | {us:.2} | |");
    }
    println!(
        "\nours / plain: {:.2}x (median of {STAT_ROUNDS} alternating runs each)",
        ours_median / plain_median
    );
    drop(server);
}
