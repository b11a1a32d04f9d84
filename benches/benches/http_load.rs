//! HTTP requests per second, in one run, of:
//! 1. bare axum (served with `ConnectInfo`);
//! 2. `RateLimitLayer` on the memory store, everything allowed;
//! 3. tower_governor 0.8 (default features off, `axum` feature), everything allowed;
//! 4. `RateLimitLayer` on Redis, everything allowed;
//! 5. a bare middleware doing one EVALSHA of the same script per request.
//!
//! The servers run in a child process (this binary with `--serve`), one
//! tokio worker thread; the load comes from `wrk` (Debian's `wrk` package) in
//! another process, one thread, the same connections and duration for every
//! variant. Rounds are interleaved and the median is reported.
//!
//! `cargo bench -p limiter-benches --bench http_load` (needs `redis-server` and `wrk`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use limiter_core::{Algorithm, RedisStore};
use limiter_tower::{Limiter, MemoryStore, RateLimitLayer, rate_limit};
use tokio::net::TcpListener;

const CONNECTIONS: &str = "64";
const WARM_UP: &str = "2s";
const MEASURE: &str = "8s";
const ROUNDS: usize = 5;

/// GCRA with room for everything: 10^9 a second, 10^9 at once. The same
/// numbers as the bare middleware's EVALSHA arguments (interval 1 µs,
/// tolerance 10^9 µs).
#[rate_limit(algorithm = gcra(rate = 1000000000/s, burst = 1000000000), by = ip)]
async fn limited() -> &'static str {
    "ok"
}

async fn bare() -> &'static str {
    "ok"
}

const VARIANTS: [&str; 5] = [
    "bare axum",
    "limiter, memory",
    "tower_governor",
    "limiter, Redis",
    "bare EVALSHA",
];

fn main() {
    if std::env::args().any(|a| a == "--serve") {
        serve();
        return;
    }
    assert!(
        Command::new("wrk").arg("--version").output().is_ok(),
        "wrk is needed: sudo apt-get install wrk"
    );
    let redis = limiter_tests::RedisServer::start();
    let mut server = Command::new(std::env::current_exe().expect("this binary"))
        .arg("--serve")
        .env("REDIS_URL", redis.url())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the server process starts");
    let mut ports = String::new();
    BufReader::new(server.stdout.take().expect("piped"))
        .read_line(&mut ports)
        .expect("the server prints its ports");
    let ports: Vec<u16> = ports
        .split_whitespace()
        .map(|p| p.parse().expect("a port"))
        .collect();

    let mut results: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    for round in 1..=ROUNDS {
        for (i, port) in ports.iter().enumerate() {
            let url = format!("http://127.0.0.1:{port}/");
            wrk(&url, WARM_UP);
            let rps = wrk(&url, MEASURE);
            eprintln!("round {round}: {:<16} {rps:>10.0} req/s", VARIANTS[i]);
            results[i].push(rps);
        }
    }
    let _ = server.kill();
    let _ = server.wait();

    let median = |runs: &Vec<f64>| {
        let mut sorted = runs.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    let rps: Vec<f64> = results.iter().map(median).collect();
    println!(
        "| server | requests/s (median of {ROUNDS}) | vs bare axum | vs tower_governor | vs bare EVALSHA |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (i, name) in VARIANTS.iter().enumerate() {
        println!(
            "| {name} | {:.0} | {:.1}% | {:.1}% | {:.1}% |",
            rps[i],
            100.0 * rps[i] / rps[0],
            100.0 * rps[i] / rps[2],
            100.0 * rps[i] / rps[4]
        );
    }
}

/// Runs wrk for `duration` and returns its requests per second.
fn wrk(url: &str, duration: &str) -> f64 {
    let output = Command::new("wrk")
        .args(["-t1", "-c", CONNECTIONS, "-d", duration, url])
        .output()
        .expect("wrk runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        !text.contains("Non-2xx"),
        "every request must be allowed:\n{text}"
    );
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output:\n{text}"))
}

/// The server process: the five variants on five ports, printed on one line.
fn serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let url = std::env::var("REDIS_URL").expect("REDIS_URL");
        let redis = RedisStore::connect(&url).await.expect("Redis");
        let raw = redis::Client::open(url.as_str())
            .expect("a URL")
            .get_multiplexed_async_connection()
            .await
            .expect("Redis");
        let governor = tower_governor::governor::GovernorConfigBuilder::default()
            .per_nanosecond(1)
            .burst_size(u32::MAX)
            .finish()
            .expect("a governor config");
        let routers = [
            Router::new().route("/", get(bare)),
            Router::new()
                .route("/", get(limited))
                .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new()))),
            Router::new()
                .route("/", get(bare))
                .layer(tower_governor::GovernorLayer::new(governor)),
            Router::new()
                .route("/", get(limited))
                .layer(RateLimitLayer::new(Limiter::new(redis))),
            Router::new()
                .route("/", get(bare))
                .layer(middleware::from_fn_with_state(Bare::new(raw), bare_evalsha)),
        ];
        let mut ports = Vec::new();
        for router in routers {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
            ports.push(listener.local_addr().expect("bound").port());
            tokio::spawn(async move {
                axum::serve(
                    listener,
                    router.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .await
                .expect("serving");
            });
        }
        let line: Vec<String> = ports.iter().map(u16::to_string).collect();
        println!("{}", line.join(" "));
        std::future::pending::<()>().await;
    });
}

/// The bare middleware's connection and script.
#[derive(Clone)]
struct Bare {
    connection: redis::aio::MultiplexedConnection,
    script: std::sync::Arc<redis::Script>,
}

impl Bare {
    fn new(connection: redis::aio::MultiplexedConnection) -> Self {
        let script = redis::Script::new(RedisStore::script_source(Algorithm::Gcra));
        Self {
            connection,
            script: std::sync::Arc::new(script),
        }
    }
}

/// One EVALSHA of the GCRA script per request, then the handler: the least
/// any Redis-backed limiter must do.
async fn bare_evalsha(
    State(bare): State<Bare>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let key = format!("bare:{}", peer.ip());
    let mut connection = bare.connection.clone();
    let reply: redis::RedisResult<Vec<i64>> = bare
        .script
        .key(key)
        .arg("")
        .arg(1)
        .arg(1)
        .arg(1_000_000_000)
        .invoke_async(&mut connection)
        .await;
    match reply {
        Ok(reply) if reply.first() == Some(&1) => next.run(request).await,
        _ => (axum::http::StatusCode::TOO_MANY_REQUESTS, "denied").into_response(),
    }
}
