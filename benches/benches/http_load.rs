//! HTTP requests per second, in one run, of:
//! 1. bare axum (served with `ConnectInfo`);
//! 2. bare axum whose handler returns the same two header fields as
//!    limiter's allowed responses, as fixed values: what the fields cost
//!    axum and hyper (inserted, encoded, sent), without any layer;
//! 3. `LimiterLayer` on the memory store, everything allowed (the default:
//!    `RateLimit-Policy` and `RateLimit` on allowed responses);
//! 4. the same without those fields on allowed responses;
//! 5. tower_governor 0.8 (default features off, `axum` feature), everything
//!    allowed (its default: no headers on allowed responses);
//! 6. the same with its `x-ratelimit-*` headers (`use_headers`);
//! 7. `LimiterLayer` on Redis, everything allowed;
//! 8. a bare middleware doing one EVALSHA of the same script per request;
//! 9. `LimiterLayer` on Redis without the fields on allowed responses
//!    (the bare middleware sends none);
//! 10. to 12. 7, 8 and 9 counting by the `x-api-key` header instead of the
//!     client address, loaded with a new key on every request
//!     (`benches/distinct_keys.lua`): no two checks share a key, so nothing
//!     coalesces, and each request is one EVALSHA of its own.
//!
//! The servers run in a child process (this binary with `--serve`), one
//! tokio worker thread; the load comes from `wrk` (Debian's `wrk` package) in
//! another process, one thread, the same connections and duration for every
//! variant. Rounds are interleaved, each in a rotated order; the table gives
//! medians over the rounds, and for each comparison the median of the
//! ratios measured within each round. Besides
//! requests per second, the server process's CPU time per request is
//! reported, user and system apart (from `/proc`): the limiter's work is user
//! time, while the kernel's share of a loopback request is the same for
//! every variant.
//!
//! `cargo bench -p limiter-benches --bench http_load` (needs `redis-server` and `wrk`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware;
use axum::routing::get;
use limiter_benches::evalsha::{self, Bare};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, RATELIMIT, RATELIMIT_POLICY, rate_limit};
use tokio::net::TcpListener;

const CONNECTIONS: &str = "64";
const WARM_UP: &str = "1s";
const MEASURE: &str = "3s";
/// Many short rounds rather than a few long ones: a VM's speed drifts by
/// ±15% over minutes, and each round compares variants measured seconds
/// apart.
const ROUNDS: usize = 12;

/// GCRA with room for everything: 10^9 a second, 10^9 at once. The same
/// numbers as the bare middleware's EVALSHA arguments
/// (`limiter_benches::evalsha`).
#[rate_limit(algorithm = gcra(rate = 1000000000/s, burst = 1000000000), by = ip)]
async fn limited() -> &'static str {
    "ok"
}

/// `limited`, counted by the `x-api-key` header.
#[rate_limit(algorithm = gcra(rate = 1000000000/s, burst = 1000000000), by = header("x-api-key"))]
async fn limited_by_api_key() -> &'static str {
    "ok"
}

async fn bare() -> &'static str {
    "ok"
}

const VARIANTS: [&str; 12] = [
    "bare axum",
    "bare axum + fixed RateLimit fields",
    "limiter, memory",
    "limiter, memory, no fields on allowed",
    "tower_governor",
    "tower_governor + headers",
    "limiter, Redis",
    "bare EVALSHA",
    "limiter, Redis, no fields on allowed",
    "limiter, Redis, distinct keys",
    "bare EVALSHA, distinct keys",
    "limiter, Redis, distinct keys, no fields on allowed",
];
// Indexes of the baselines in `VARIANTS`.
const BARE: usize = 0;
const BARE_WITH_FIELDS: usize = 1;
const LIMITER_MEMORY: usize = 2;
const GOVERNOR: usize = 4;
const GOVERNOR_WITH_HEADERS: usize = 5;
const EVALSHA: usize = 7;
/// The first of the variants loaded with a new `x-api-key` per request.
const FIRST_DISTINCT: usize = 9;
const EVALSHA_DISTINCT: usize = 10;

/// The wrk script that sends a new `x-api-key` with every request.
const DISTINCT_KEYS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/distinct_keys.lua");

/// The fields limiter sends on `limited`'s allowed responses (remaining
/// 999999999 is what a fresh key shows after one request).
const POLICY_FIELD: &str = "\"1000000000-per-1s-burst-1000000000\";q=1000000000;w=1";
const STATE_FIELD: &str = "\"1000000000-per-1s-burst-1000000000\";r=999999999;t=1";

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

    // The control sends what limiter sends: check it once.
    let (policy, state) = fields(ports[LIMITER_MEMORY]);
    assert_eq!(policy, POLICY_FIELD);
    assert_eq!(state.len(), STATE_FIELD.len(), "{state}");
    assert_eq!(
        fields(ports[BARE_WITH_FIELDS]),
        (POLICY_FIELD.into(), STATE_FIELD.into())
    );

    // results[round][variant] = (requests/s, server user and system CPU µs per request)
    let mut results = vec![[(0.0, 0.0, 0.0); VARIANTS.len()]; ROUNDS];
    for (round, result) in results.iter_mut().enumerate() {
        // Each round starts one variant later, so no variant always runs
        // first or last.
        for i in (0..VARIANTS.len()).map(|k| (k + round) % VARIANTS.len()) {
            let url = format!("http://127.0.0.1:{}/", ports[i]);
            // Keys of their own for each wrk run (`round.variant.run`).
            let keys = |run: &str| (i >= FIRST_DISTINCT).then(|| format!("{round}.{i}.{run}"));
            wrk(&url, WARM_UP, keys("warm-up").as_deref());
            let before = cpu_seconds(server.id());
            let (rps, requests) = wrk(&url, MEASURE, keys("measured").as_deref());
            let after = cpu_seconds(server.id());
            let per_request = |t: fn(&Cpu) -> f64| (t(&after) - t(&before)) * 1e6 / requests;
            let (user, system) = (per_request(|c| c.user), per_request(|c| c.system));
            eprintln!(
                "round {}: {:<38} {rps:>10.0} req/s {user:>6.2} + {system:>6.2} µs server CPU/request (user + system)",
                round + 1,
                VARIANTS[i]
            );
            result[i] = (rps, user, system);
        }
    }
    let _ = server.kill();
    let _ = server.wait();

    let median = |values: Vec<f64>| {
        let mut sorted = values;
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    let rps = |i: usize| median(results.iter().map(|r| r[i].0).collect());
    let user = |i: usize| median(results.iter().map(|r| r[i].1).collect());
    let system = |i: usize| median(results.iter().map(|r| r[i].2).collect());
    // The ratio within each round, then the median over rounds.
    let ratio = |i: usize, of: usize| {
        let ratio = median(results.iter().map(|r| r[i].0 / r[of].0).collect());
        format!("{:.1}%", 100.0 * ratio)
    };
    println!(
        "| server | requests/s (median of {ROUNDS}) | vs bare axum | vs bare axum + fields | vs tower_governor | vs tower_governor + headers | vs bare EVALSHA | server CPU µs/request, user + system |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (i, name) in VARIANTS.iter().enumerate() {
        println!(
            "| {name} | {:.0} | {} | {} | {} | {} | {} | {:.2} + {:.2} |",
            rps(i),
            ratio(i, BARE),
            ratio(i, BARE_WITH_FIELDS),
            ratio(i, GOVERNOR),
            ratio(i, GOVERNOR_WITH_HEADERS),
            ratio(
                i,
                if i < FIRST_DISTINCT {
                    EVALSHA
                } else {
                    EVALSHA_DISTINCT
                }
            ),
            user(i),
            system(i)
        );
    }
    println!(
        "\nRatios are medians over the rounds of the ratio within each round; requests/s and CPU are medians over the rounds. The distinct-keys rows are compared with the bare EVALSHA middleware under the same load (distinct keys)."
    );
}

/// The `RateLimit-Policy` and `RateLimit` values of one `GET /` on `port`.
fn fields(port: u16) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("reads");
    let value = |name: &str| {
        response
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("no {name} in {response}"))
            .to_owned()
    };
    (value("ratelimit-policy"), value("ratelimit"))
}

/// CPU time a process has used, in seconds.
struct Cpu {
    user: f64,
    system: f64,
}

/// The CPU time process `pid` has used.
fn cpu_seconds(pid: u32) -> Cpu {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("(comm)") + 2..]
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    // /proc counts in USER_HZ ticks, 100 a second on Linux.
    let seconds = |field: &str| field.parse::<f64>().expect("a tick count") / 100.0;
    Cpu {
        user: seconds(fields[11]),
        system: seconds(fields[12]),
    }
}

/// Runs wrk for `duration` and returns its requests per second and the
/// number of requests; with `distinct_keys`, each request carries an
/// `x-api-key` of its own, starting with that text.
fn wrk(url: &str, duration: &str, distinct_keys: Option<&str>) -> (f64, f64) {
    let mut command = Command::new("wrk");
    command.args(["-t1", "-c", CONNECTIONS, "-d", duration]);
    if let Some(prefix) = distinct_keys {
        command.args(["-s", DISTINCT_KEYS, url, "--", prefix]);
    } else {
        command.arg(url);
    }
    let output = command.output().expect("wrk runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        !text.contains("Non-2xx"),
        "every request must be allowed:\n{text}"
    );
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output:\n{text}"));
    // "  911310 requests in 8.00s, 102.55MB read"
    let requests = text
        .lines()
        .find_map(|l| l.split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's output:\n{text}"));
    (rps, requests)
}

/// The server process: the variants on ports of their own, printed on one line.
fn serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let url = std::env::var("REDIS_URL").expect("REDIS_URL");
        // The bare middleware's deadline (redis-rs's default): a call past
        // the store's default of 50 ms, under valgrind or on a loaded VM,
        // would be decided by the fallback instead of Redis.
        let config = RedisConfig::new().response_timeout(Duration::from_millis(500));
        let connect = || RedisStore::connect_with(&url, config.clone());
        let redis = connect().await.expect("Redis");
        let redis_no_fields = connect().await.expect("Redis");
        let redis_distinct = connect().await.expect("Redis");
        let redis_distinct_no_fields = connect().await.expect("Redis");
        let raw = redis::Client::open(url.as_str())
            .expect("a URL")
            .get_multiplexed_async_connection()
            .await
            .expect("Redis");
        let bare_state = Bare::new(raw);
        let [governor, governor_with_headers] = limiter_benches::governed(get(bare));
        let routers = [
            Router::new().route("/", get(bare)),
            Router::new().route("/", get(bare_with_fields)),
            Router::new()
                .route("/", get(limited))
                .layer(LimiterLayer::new(Limiter::new(MemoryStore::new()))),
            Router::new().route("/", get(limited)).layer(
                LimiterLayer::new(Limiter::new(MemoryStore::new())).rate_limit_headers(false),
            ),
            governor,
            governor_with_headers,
            Router::new()
                .route("/", get(limited))
                .layer(LimiterLayer::new(Limiter::new(redis))),
            Router::new()
                .route("/", get(bare))
                .layer(middleware::from_fn_with_state(
                    bare_state.clone(),
                    evalsha::by_address,
                )),
            Router::new()
                .route("/", get(limited))
                .layer(LimiterLayer::new(Limiter::new(redis_no_fields)).rate_limit_headers(false)),
            Router::new()
                .route("/", get(limited_by_api_key))
                .layer(LimiterLayer::new(Limiter::new(redis_distinct))),
            Router::new()
                .route("/", get(bare))
                .layer(middleware::from_fn_with_state(
                    bare_state.clone(),
                    evalsha::by_api_key,
                )),
            Router::new().route("/", get(limited_by_api_key)).layer(
                LimiterLayer::new(Limiter::new(redis_distinct_no_fields)).rate_limit_headers(false),
            ),
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

/// The bare handler with limiter's two fields as fixed values: what the
/// fields cost axum and hyper, without a layer's cost.
async fn bare_with_fields() -> ([(HeaderName, HeaderValue); 2], &'static str) {
    let fields = [
        (
            RATELIMIT_POLICY.clone(),
            HeaderValue::from_static(POLICY_FIELD),
        ),
        (RATELIMIT.clone(), HeaderValue::from_static(STATE_FIELD)),
    ];
    (fields, "ok")
}
