//! One hot key, two instances of 64 tasks each, on a standalone Redis and
//! on the 3-master cluster: checked directly (the baseline), leased,
//! sharded (S = 3) and sampled (k = 10). For each: decisions per second and
//! Redis calls per decision (`INFO commandstats`, every node), first under
//! the limit (a steady hot rate), then saturated (a limit of 20,000 a
//! second), where the most admissions seen in any second is reported
//! beside the limit.
//!
//! Starts its own servers (the test harness) and prints markdown. Run with
//! `cargo bench -p limiter-benches --bench hot_key_modes`.

use limiter_benches::{evalsha_totals, most_in_any_second};
use std::sync::Arc;
use std::time::{Duration, Instant};

use limiter_core::{Lease, Limiter, Policy, Rule};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisCluster, RedisServer};

const TASKS_PER_INSTANCE: usize = 64;
const INSTANCES: usize = 2;
const RUN: Duration = Duration::from_secs(3);
/// Saturated: the demand is far above this.
const SATURATED_LIMIT: u64 = 20_000;
/// Under the limit: never reached.
const ROOMY_LIMIT: u64 = 100_000_000;

#[derive(Clone, Copy)]
enum Mode {
    Direct,
    Leased,
    Sharded,
    Sampled,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Leased => "leased (max 100, 100 ms)",
            Self::Sharded => "sharded (S = 3)",
            Self::Sampled => "sampled (k = 10)",
        }
    }

    fn policy(self, limit: u64) -> Policy {
        let rule = Rule::new(limit, Duration::from_secs(1)).expect("a rule");
        let log = Policy::sliding_log([rule]).expect("a policy");
        match self {
            Self::Direct => Ok(log),
            Self::Leased => log.with_lease(Lease::new(100, Duration::from_millis(100)).unwrap()),
            Self::Sharded => log.with_shards(3),
            Self::Sampled => log.with_sampling(10),
        }
        .expect("a valid mode")
    }
}

struct Outcome {
    decisions: u64,
    /// When each admitted check started and ended (µs): its decision was
    /// made in between.
    admitted: Vec<(u64, u64)>,
    calls: u64,
    elapsed: Duration,
}

async fn run(stores: &[RedisStore], urls: &[String], policy: Policy, key: &str) -> Outcome {
    let before = evalsha_calls(urls);
    let started = Instant::now();
    let deadline = started + RUN;
    let mut tasks = Vec::new();
    for store in stores {
        let limiter = Arc::new(Limiter::new(store.clone()));
        for _ in 0..TASKS_PER_INSTANCE {
            let (limiter, policy, key) = (Arc::clone(&limiter), policy.clone(), key.to_owned());
            tasks.push(tokio::spawn(async move {
                let (mut decisions, mut admitted) = (0u64, Vec::new());
                while Instant::now() < deadline {
                    let start = started.elapsed().as_micros() as u64;
                    let decision = limiter.check(&key, &policy).await.expect("Redis is up");
                    decisions += 1;
                    if decision.allowed() {
                        admitted.push((start, started.elapsed().as_micros() as u64));
                    }
                }
                (decisions, admitted)
            }));
        }
    }
    let mut outcome = Outcome {
        decisions: 0,
        admitted: Vec::new(),
        calls: 0,
        elapsed: Duration::ZERO,
    };
    for task in tasks {
        let (decisions, admitted) = task.await.expect("a task");
        outcome.decisions += decisions;
        outcome.admitted.extend(admitted);
    }
    outcome.elapsed = started.elapsed();
    outcome.calls = evalsha_calls(urls) - before;
    outcome
}

fn evalsha_calls(urls: &[String]) -> u64 {
    urls.iter().map(|url| evalsha_totals(url).0).sum()
}

async fn deployment(name: &str, stores: Vec<RedisStore>, urls: Vec<String>) {
    println!("\n### {name}: one hot key, {INSTANCES} instances × {TASKS_PER_INSTANCE} tasks\n");
    println!(
        "| mode | under the limit: decisions/s | calls/decision | saturated (limit {SATURATED_LIMIT}/s): decisions/s | calls/decision | most admitted within 1 s |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, mode) in [Mode::Direct, Mode::Leased, Mode::Sharded, Mode::Sampled]
        .into_iter()
        .enumerate()
    {
        let roomy = run(
            &stores,
            &urls,
            mode.policy(ROOMY_LIMIT),
            &format!("roomy{i}"),
        )
        .await;
        let mut saturated = run(
            &stores,
            &urls,
            mode.policy(SATURATED_LIMIT),
            &format!("hot{i}"),
        )
        .await;
        let rate = |o: &Outcome| o.decisions as f64 / o.elapsed.as_secs_f64();
        let per_decision = |o: &Outcome| o.calls as f64 / o.decisions as f64;
        println!(
            "| {} | {:.0} | {:.4} | {:.0} | {:.4} | {} |",
            mode.name(),
            rate(&roomy),
            per_decision(&roomy),
            rate(&saturated),
            per_decision(&saturated),
            most_in_any_second(&mut saturated.admitted),
        );
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let server = RedisServer::start();
        // A generous deadline: a loaded 2-core machine, not the deadline, is measured.
        let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
        let url = server.url();
        let connect = || RedisStore::connect_with(&url, config.clone());
        let stores = vec![
            connect().await.expect("connect"),
            connect().await.expect("connect"),
        ];
        deployment("Standalone Redis", stores, vec![server.url()]).await;
        drop(server);
        let cluster = RedisCluster::start();
        let stores = vec![cluster.store().await, cluster.store().await];
        deployment("Redis Cluster, 3 masters", stores, cluster.urls()).await;
    });
}
