//! Redis load of the UGC server's `GET /trending` (1,000 per second for all
//! clients together, `by = global`): two server instances, each with a
//! `RedisStore` of its own, under as many requests as 64 tasks each can
//! send, in process. Three set-ups, same run, same Redis: the route as it
//! was before hot-key work (every check its own call, `coalesce(false)`,
//! no lease), the same with coalescing (the Redis store's default), and the
//! UGC server as shipped (coalesced and leased, `lease = 50`). Redis calls
//! and Redis CPU (`usec` of `cmdstat_evalsha`) per request from
//! `INFO commandstats`.
//!
//! `cargo bench -p limiter-benches --bench ugc_trending`; see BENCHMARKS.md.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use limiter_benches::{evalsha_totals, most_in_any_second};
use limiter_core::{GuardConfig, OnStoreError};
use limiter_examples::{Options, app};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use limiter_tower::{Limiter, LimiterLayer, rate_limit};
use tower::ServiceExt;

const INSTANCES: usize = 2;
const TASKS: usize = 64;
const RUN: Duration = Duration::from_secs(3);

/// `GET /trending` as it was before leasing: the same limit, no lease.
#[rate_limit(rules = [(1000, 1s)], by = global)]
async fn trending_unleased() -> impl IntoResponse {
    "[]"
}

#[derive(Clone, Copy)]
enum Setup {
    Direct,
    Coalesced,
    Shipped,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Direct => "before: direct (no coalescing, no lease)",
            Setup::Coalesced => "coalesced (the Redis store's default), no lease",
            Setup::Shipped => "as shipped: coalesced and leased (lease = 50)",
        }
    }

    async fn router(self, url: &str) -> Router {
        let config = RedisConfig::new().coalesce(!matches!(self, Setup::Direct));
        let store = RedisStore::connect_with(url, config)
            .await
            .expect("connect");
        let limiter = Limiter::new(store);
        // Failing closed: a call past its deadline answers 503 and is
        // counted apart, instead of a local fallback admitting on its own.
        let guard = GuardConfig {
            on_store_error: OnStoreError::FailClosed,
            ..GuardConfig::default()
        };
        match self {
            Setup::Shipped => app(
                limiter,
                Options {
                    guard,
                    ..Options::default()
                },
            ),
            Setup::Direct | Setup::Coalesced => Router::new()
                .route("/trending", get(trending_unleased))
                .layer(LimiterLayer::new(limiter).guard(guard)),
        }
    }
}

struct Outcome {
    requests: u64,
    /// Answered 503: the store's call failed (past its deadline).
    failed: u64,
    /// Each allowed request's start and end, µs after the run's start.
    allowed: Vec<(u64, u64)>,
    elapsed: Duration,
    calls: u64,
    usec: u64,
}

async fn run(setup: Setup, url: &str) -> Outcome {
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut redis::Client::open(url).unwrap().get_connection().unwrap())
        .expect("FLUSHALL");
    let mut routers = Vec::new();
    for _ in 0..INSTANCES {
        routers.push(setup.router(url).await);
    }
    let (calls_before, usec_before) = evalsha_totals(url);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for router in &routers {
        for _ in 0..TASKS {
            let router = router.clone();
            tasks.push(tokio::spawn(async move {
                let (mut requests, mut failed, mut allowed) = (0u64, 0u64, Vec::new());
                let micros = || started.elapsed().as_micros() as u64;
                while started.elapsed() < RUN {
                    // A request reaches a server through its socket: the
                    // task yields between requests, as a server's does.
                    tokio::task::yield_now().await;
                    let request = Request::get("/trending").body(Body::empty()).unwrap();
                    let start = micros();
                    let response = router.clone().oneshot(request).await.unwrap();
                    requests += 1;
                    match response.status() {
                        StatusCode::OK => allowed.push((start, micros())),
                        StatusCode::TOO_MANY_REQUESTS => {}
                        StatusCode::SERVICE_UNAVAILABLE => failed += 1,
                        status => panic!("unexpected status {status}"),
                    }
                }
                (requests, failed, allowed)
            }));
        }
    }
    let (mut requests, mut failed, mut allowed) = (0, 0, Vec::new());
    for task in tasks {
        let (r, f, a) = task.await.expect("a task");
        requests += r;
        failed += f;
        allowed.extend(a);
    }
    let elapsed = started.elapsed();
    let (calls, usec) = evalsha_totals(url);
    Outcome {
        requests,
        failed,
        allowed,
        elapsed,
        calls: calls - calls_before,
        usec: usec - usec_before,
    }
}

fn main() {
    let server = RedisServer::start();
    let url = server.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "UGC GET /trending: {INSTANCES} instances x {TASKS} tasks, {RUN:?} each, one redis-server"
    );
    println!();
    println!(
        "| set-up | requests/s | allowed/s | most allowed within 1 s | store failures (503) | Redis calls/request | Redis µs/request | Redis CPU (% of a core) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for setup in [Setup::Direct, Setup::Coalesced, Setup::Shipped] {
        let mut outcome = runtime.block_on(run(setup, &url));
        let seconds = outcome.elapsed.as_secs_f64();
        let requests = outcome.requests as f64;
        println!(
            "| {} | {:.0} | {:.0} | {} | {} | {:.4} | {:.3} | {:.1} |",
            setup.name(),
            requests / seconds,
            outcome.allowed.len() as f64 / seconds,
            most_in_any_second(&mut outcome.allowed),
            outcome.failed,
            outcome.calls as f64 / requests,
            outcome.usec as f64 / requests,
            outcome.usec as f64 / 1e4 / seconds,
        );
    }
}
