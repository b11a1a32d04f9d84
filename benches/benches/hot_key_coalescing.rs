//! Hot keys: decisions per second and Redis calls per decision of the Redis
//! store with its checks coalesced (the default) and direct
//! (`RedisConfig::coalesce(false)`), on one hot key (a token bucket that
//! never denies) and on one key flooded far over a sliding log's limit, on
//! a standalone Redis and a 3-master cluster (many distinct keys:
//! `distinct_keys.rs`).
//!
//! Two instances (two `RedisStore`s, each on connections of its own) run 64
//! tasks each, checking as fast as they can. Redis calls are read from
//! `INFO commandstats` (`cmdstat_evalsha` calls, summed over the nodes)
//! after a `CONFIG RESETSTAT`; the clients' CPU time is this process's
//! (`/proc/self/stat`; the servers are processes of their own). Starts its
//! own servers (the test harness) and prints markdown. Run with
//! `cargo bench -p limiter-benches --bench hot_key_coalescing`; see BENCHMARKS.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use limiter_benches::redis_stats::{admins, evalsha_stats, reset};
use limiter_benches::{process_cpu_us, redis_instances, thousands};
use limiter_core::{Key, Policy, Rate, Rule, Store};
use limiter_redis::RedisStore;
use limiter_tests::{RedisCluster, RedisServer};
use redis::aio::MultiplexedConnection;

const INSTANCES: usize = 2;
const TASKS_PER_INSTANCE: usize = 64;
/// Unmeasured run of each side before the measurement.
const WARM_UP: Duration = Duration::from_millis(500);
/// Each side is measured for `SLICES` slices of `SLICE`, alternating which
/// goes first, so a burst of load from another process falls on both.
const SLICE: Duration = Duration::from_millis(250);
const SLICES: usize = 16;

#[derive(Clone, Copy, PartialEq)]
enum Load {
    /// Every check on one key.
    Hot,
    /// Every check on one key under a sliding log of two rules, far over
    /// its limit: a flood of one client (nearly every check denied).
    Flood,
}

/// Decisions, Redis calls, Redis's time in them and the time of one side,
/// summed over its slices.
#[derive(Default)]
struct Tally {
    decisions: u64,
    calls: u64,
    redis_usec: u64,
    /// CPU time of this process, the instances (the clients).
    client_usec: u64,
    elapsed: Duration,
    /// Decisions per second of each slice.
    slices: Vec<f64>,
}

impl Tally {
    fn per_second(&self) -> f64 {
        self.decisions as f64 / self.elapsed.as_secs_f64()
    }

    fn calls_per_decision(&self) -> f64 {
        self.calls as f64 / self.decisions as f64
    }

    /// Microseconds Redis spent running scripts, per decision.
    fn redis_usec_per_decision(&self) -> f64 {
        self.redis_usec as f64 / self.decisions as f64
    }

    /// Microseconds of CPU the clients spent, per decision.
    fn client_usec_per_decision(&self) -> f64 {
        self.client_usec as f64 / self.decisions as f64
    }
}

/// A token bucket that never denies: every check writes (the most work a
/// check does), and the key's state stays alive. The flood's: the sliding
/// log (the default algorithm), 100 a second and 1,000 a minute.
fn policy(load: Load) -> Policy {
    if load == Load::Flood {
        let rules = [
            Rule::new(100, Duration::from_secs(1)).expect("a rule"),
            Rule::new(1_000, Duration::from_secs(60)).expect("a rule"),
        ];
        return Policy::sliding_log(rules).expect("a policy");
    }
    Policy::token_bucket(Rate::per_second(1).expect("a rate"), 1 << 30).expect("a policy")
}

/// Runs every task for `duration`; returns the decisions made and the time
/// until the last check in flight returned.
async fn run(stores: &[RedisStore], load: Load, duration: Duration) -> (u64, Duration) {
    let policy = Arc::new(policy(load));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let tasks = INSTANCES * TASKS_PER_INSTANCE;
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let store = stores[task % INSTANCES].clone();
            let (policy, stop) = (Arc::clone(&policy), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut done = 0u64;
                let key = Key::from(if load == Load::Flood { "flood" } else { "hot" });
                while !stop.load(Ordering::Relaxed) {
                    let decision = store.check(&key, &policy, 1).await;
                    let allowed = decision.expect("a decision").allowed();
                    assert!(allowed || load == Load::Flood, "the bucket never denies");
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

async fn measure(
    stores: &[RedisStore],
    load: Load,
    admins: &mut [MultiplexedConnection],
    tally: &mut Tally,
) {
    reset(admins).await;
    let cpu = process_cpu_us();
    let (decisions, elapsed) = run(stores, load, SLICE).await;
    tally.client_usec += process_cpu_us() - cpu;
    let (calls, usec) = evalsha_stats(admins).await;
    tally.calls += calls;
    tally.redis_usec += usec;
    tally.decisions += decisions;
    tally.elapsed += elapsed;
    tally.slices.push(decisions as f64 / elapsed.as_secs_f64());
}

/// Direct and coalesced, alternately, on one deployment and load.
async fn compare(
    seeds: &[String],
    cluster: bool,
    load: Load,
    admins: &mut [MultiplexedConnection],
) -> (Tally, Tally) {
    let direct = redis_instances(seeds, cluster, false, INSTANCES).await;
    let coalesced = redis_instances(seeds, cluster, true, INSTANCES).await;
    run(&direct, load, WARM_UP).await;
    run(&coalesced, load, WARM_UP).await;
    let (mut d, mut c) = (Tally::default(), Tally::default());
    for slice in 0..SLICES {
        if slice % 2 == 0 {
            measure(&direct, load, admins, &mut d).await;
            measure(&coalesced, load, admins, &mut c).await;
        } else {
            measure(&coalesced, load, admins, &mut c).await;
            measure(&direct, load, admins, &mut d).await;
        }
    }
    (d, c)
}

/// The median of coalesced / direct over the pairs of slices run side by
/// side: a burst of load from another process moves it less than the totals.
fn median_ratio(direct: &Tally, coalesced: &Tally) -> f64 {
    let mut ratios: Vec<f64> = coalesced
        .slices
        .iter()
        .zip(&direct.slices)
        .map(|(c, d)| c / d)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let middle = ratios.len() / 2;
    if ratios.len().is_multiple_of(2) {
        (ratios[middle - 1] + ratios[middle]) / 2.0
    } else {
        ratios[middle]
    }
}

// One worker thread, as in `redis_throughput`: the Redis servers get the
// other core.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    if std::env::args().any(|arg| arg == "--client-only") {
        return client_only().await;
    }
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "{INSTANCES} instances x {TASKS_PER_INSTANCE} tasks, token bucket (never denies) or sliding log, \
         {cores} cores, tokio runtime with 1 worker thread"
    );
    println!("each side: {WARM_UP:?} warm-up, then {SLICES} alternating slices of {SLICE:?}\n");
    println!(
        "| deployment | keys | direct decisions/s | coalesced decisions/s | coalesced / direct | median of slice ratios | Redis calls/decision, direct | coalesced | Redis µs/decision, direct | coalesced | client CPU µs/decision, direct | coalesced |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let deployments = [
        ("standalone", vec![server.url()], false),
        ("cluster, 3 masters", cluster.urls(), true),
    ];
    for (name, urls, is_cluster) in deployments {
        let mut admins = admins(&urls).await;
        let loads = [
            (Load::Hot, "1 (hot)"),
            (Load::Flood, "1 (hot), sliding log over its limit"),
        ];
        for (load, keys) in loads {
            let (direct, coalesced) = compare(&urls, is_cluster, load, &mut admins).await;
            println!(
                "| {name} | {keys} | {} | {} | {:.2}x | {:.2}x | {:.3} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |",
                thousands(direct.per_second()),
                thousands(coalesced.per_second()),
                coalesced.per_second() / direct.per_second(),
                median_ratio(&direct, &coalesced),
                direct.calls_per_decision(),
                coalesced.calls_per_decision(),
                direct.redis_usec_per_decision(),
                coalesced.redis_usec_per_decision(),
                direct.client_usec_per_decision(),
                coalesced.client_usec_per_decision(),
            );
        }
    }
}

/// `--client-only SECONDS`: the coalesced hot key on the standalone Redis
/// for that long, printing the decisions and calls: runs of two lengths
/// under callgrind count the clients' instructions per decision, part by
/// part, without start-up (see the lab notes, section 8).
async fn client_only() {
    let seconds = std::env::args()
        .skip_while(|arg| arg != "--client-only")
        .nth(1)
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(4);
    let server = RedisServer::start();
    let coalesced = redis_instances(&[server.url()], false, true, INSTANCES).await;
    let (decisions, elapsed) = run(&coalesced, Load::Hot, Duration::from_secs(seconds)).await;
    let calls = evalsha_stats(&mut admins(&[server.url()]).await).await.0;
    println!("{decisions} decisions, {calls} Redis calls in {elapsed:?}");
}
