//! Many distinct keys: decisions per second and Redis's time per decision
//! of the default check (the seeds' sliding log, 10 a minute and 20 in
//! two) over 100,000 keys, batched (the default: checks of other keys
//! meeting a call in flight go together in the next call) and direct
//! (`RedisConfig::coalesce(false)`: a call per check), on a standalone
//! Redis and a 3-master cluster (batched per node).
//!
//! Two instances (two `RedisStore`s, each on connections of its own) run 64
//! tasks each, every task cycling through its share of the keys, as fast as
//! it can; then one task alone, for the latency of a lone check. Redis's
//! time is read from `INFO commandstats` (`cmdstat_evalsha`) after a
//! `CONFIG RESETSTAT`, and its CPU time from `INFO cpu` (`used_cpu_user` +
//! `used_cpu_sys`, every thread of the server), summed over the nodes.
//! Each side is measured in alternating slices. Starts its own servers (the
//! test harness) and prints markdown. Run with
//! `cargo bench -p limiter-benches --bench distinct_keys`; see
//! BENCHMARKS.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use limiter_benches::redis_stats::{admins, cpu_usec, evalsha_stats, reset};
use limiter_benches::{redis_instances, thousands};
use limiter_core::{Key, Policy, Rule, Store};
use limiter_redis::RedisStore;
use limiter_tests::{RedisCluster, RedisServer};
use redis::aio::MultiplexedConnection;

const INSTANCES: usize = 2;
const TASKS_PER_INSTANCE: usize = 64;
const KEYS: usize = 100_000;
const WARM_UP: Duration = Duration::from_millis(500);
const SLICE: Duration = Duration::from_millis(500);
const SLICES: usize = 8;

/// The seeds' default check.
fn policy() -> Policy {
    Policy::sliding_log([
        Rule::new(10, Duration::from_secs(60)).expect("a rule"),
        Rule::new(20, Duration::from_secs(120)).expect("a rule"),
    ])
    .expect("a policy")
}

/// One side's decisions, Redis's time and CPU, and each check's latency.
#[derive(Default)]
struct Tally {
    decisions: u64,
    elapsed: Duration,
    redis_usec: u64,
    redis_cpu_usec: u64,
    /// Microseconds each check took.
    latencies: Vec<u32>,
}

impl Tally {
    fn per_second(&self) -> f64 {
        self.decisions as f64 / self.elapsed.as_secs_f64()
    }

    fn per_decision(&self, usec: u64) -> f64 {
        usec as f64 / self.decisions as f64
    }

    /// The latency below which `share` of the checks fall, in µs.
    fn percentile(&mut self, share: f64) -> u32 {
        self.latencies.sort_unstable();
        let at = ((self.latencies.len() as f64 * share) as usize).min(self.latencies.len() - 1);
        self.latencies[at]
    }
}

/// `tasks` tasks over the instances for `duration`; the decisions, the
/// time until the last check returned, and each check's latency. `round`
/// moves the keys on, so each slice checks keys the others did not.
async fn run(
    stores: &[RedisStore],
    tasks: usize,
    round: usize,
    duration: Duration,
) -> (u64, Duration, Vec<u32>) {
    let policy = Arc::new(policy());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let store = stores[task % stores.len()].clone();
            let (policy, stop) = (Arc::clone(&policy), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = task + round * 7_919;
                while !stop.load(Ordering::Relaxed) {
                    let key = Key::from(format!("distinct:{}", n % KEYS));
                    let began = Instant::now();
                    let decision = store.check(&key, &policy, 1).await;
                    latencies.push(began.elapsed().as_micros() as u32);
                    decision.expect("a decision");
                    n += tasks;
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.await.expect("a benchmark task"));
    }
    (latencies.len() as u64, start.elapsed(), latencies)
}

async fn measure(
    stores: &[RedisStore],
    tasks: usize,
    round: usize,
    admins: &mut [MultiplexedConnection],
    tally: &mut Tally,
) {
    reset(admins).await;
    let cpu = cpu_usec(admins).await;
    let (decisions, elapsed, latencies) = run(stores, tasks, round, SLICE).await;
    tally.redis_cpu_usec += cpu_usec(admins).await - cpu;
    tally.redis_usec += evalsha_stats(admins).await.1;
    tally.decisions += decisions;
    tally.elapsed += elapsed;
    tally.latencies.extend(latencies);
}

/// Direct and batched, alternately, with `tasks` tasks.
async fn compare(
    urls: &[String],
    cluster: bool,
    tasks: usize,
    admins: &mut [MultiplexedConnection],
) -> [Tally; 2] {
    let direct = redis_instances(urls, cluster, false, INSTANCES).await;
    let batched = redis_instances(urls, cluster, true, INSTANCES).await;
    run(&direct, tasks, 0, WARM_UP).await;
    run(&batched, tasks, 0, WARM_UP).await;
    let (mut d, mut b) = (Tally::default(), Tally::default());
    for slice in 0..SLICES {
        let round = slice + 1;
        if slice % 2 == 0 {
            measure(&direct, tasks, round, admins, &mut d).await;
            measure(&batched, tasks, round, admins, &mut b).await;
        } else {
            measure(&batched, tasks, round, admins, &mut b).await;
            measure(&direct, tasks, round, admins, &mut d).await;
        }
    }
    [d, b]
}

// One worker thread, as in the other Redis benchmarks: the Redis servers
// get the other core.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    println!(
        "{INSTANCES} instances x {TASKS_PER_INSTANCE} tasks (and 1 task alone), {KEYS} keys, \
         sliding log 10/60 s + 20/120 s; each side: {WARM_UP:?} warm-up, then {SLICES} alternating \
         slices of {SLICE:?}\n"
    );
    println!(
        "| deployment | tasks | sent as | decisions/s | Redis µs/decision (commandstats) | Redis CPU µs/decision | p50 µs | p99 µs |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    let deployments = [
        ("standalone", vec![server.url()], false),
        ("cluster, 3 masters", cluster.urls(), true),
    ];
    for (name, urls, is_cluster) in deployments {
        let mut admins = admins(&urls).await;
        for tasks in [INSTANCES * TASKS_PER_INSTANCE, 1] {
            let sides = compare(&urls, is_cluster, tasks, &mut admins).await;
            for (mut tally, sent_as) in sides.into_iter().zip(["direct", "batched"]) {
                println!(
                    "| {name} | {tasks} | {sent_as} | {} | {:.2} | {:.2} | {} | {} |",
                    thousands(tally.per_second()),
                    tally.per_decision(tally.redis_usec),
                    tally.per_decision(tally.redis_cpu_usec),
                    tally.percentile(0.5),
                    tally.percentile(0.99),
                );
            }
        }
    }
}
