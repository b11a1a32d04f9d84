//! Shared pieces of the benchmarks.

use axum::Router;
use axum::routing::MethodRouter;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

pub mod evalsha;
pub mod redis_stats;

/// `route` at `/` behind tower_governor with room for everything (one
/// request a nanosecond, a burst of `u32::MAX`): first with its default of
/// no headers on allowed responses, then with its `x-ratelimit-*` headers
/// (`use_headers`).
pub fn governed(route: MethodRouter) -> [Router; 2] {
    let mut config = GovernorConfigBuilder::default();
    config.per_nanosecond(1).burst_size(u32::MAX);
    let plain = config.finish().expect("a governor config");
    let with_headers = config.use_headers().finish().expect("a governor config");
    [
        Router::new()
            .route("/", route.clone())
            .layer(GovernorLayer::new(plain)),
        Router::new()
            .route("/", route)
            .layer(GovernorLayer::new(with_headers)),
    ]
}

/// `route` with tower_governor on the route itself (`MethodRouter::layer`)
/// rather than on the router: the same room for everything and no headers
/// as [`governed`]'s first router.
pub fn governed_route(route: MethodRouter) -> MethodRouter {
    let config = GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(u32::MAX)
        .finish()
        .expect("a governor config");
    route.layer(GovernorLayer::new(config))
}

/// The most admissions certainly made within one second `(t - 1 s, t]`:
/// those whose check started after `t - 1 s` and ended by `t` (a check's
/// decision falls between its start and end; a lease's local decision
/// takes a microsecond, a call to Redis a round trip). On this process's
/// clock.
pub fn most_in_any_second(admitted: &mut [(u64, u64)]) -> usize {
    admitted.sort_unstable_by_key(|&(_, end)| end);
    let mut starts: Vec<u64> = admitted.iter().map(|&(start, _)| start).collect();
    starts.sort_unstable();
    starts.dedup();
    // A Fenwick tree over the starts seen so far.
    let mut tree = vec![0usize; starts.len() + 1];
    let mut most = 0;
    for (seen, &(start, end)) in admitted.iter().enumerate() {
        let mut i = starts.partition_point(|&s| s < start) + 1;
        while i < tree.len() {
            tree[i] += 1;
            i += i & i.wrapping_neg();
        }
        // Started at or before end - 1 s: not certainly inside.
        let mut before = 0;
        let mut i = starts.partition_point(|&s| s + 1_000_000 <= end);
        while i > 0 {
            before += tree[i];
            i -= i & i.wrapping_neg();
        }
        most = most.max(seen + 1 - before);
    }
    most
}

/// A field of `cmdstat_evalsha` in an `INFO commandstats` reply (`calls`,
/// `usec`, `usec_per_call`, `failed_calls`, ...); `None` before the first
/// EVALSHA.
pub fn evalsha_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))?
        .split(',')
        .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
}

/// EVALSHA calls and the microseconds Redis spent in them, at `url`.
pub fn evalsha_totals(url: &str) -> (u64, u64) {
    let client = redis::Client::open(url).expect("a URL");
    let mut connection = client.get_connection().expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .expect("INFO commandstats");
    let number = |name| evalsha_field(&info, name).map_or(0, |n| n.parse().expect("a count"));
    (number("calls"), number("usec"))
}

/// The CPU time this process has used (user and system), from
/// `/proc/self/stat`, in microseconds (Linux counts it in ticks of 10 ms:
/// measure over seconds).
pub fn process_cpu_us() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command's name, which ends at the last ')':
    // utime and stime are the 12th and 13th of them.
    let after_name = &stat[stat.rfind(')').expect("a command name") + 2..];
    let ticks: u64 = after_name
        .split(' ')
        .skip(11)
        .take(2)
        .map(|field| field.parse::<u64>().expect("a tick count"))
        .sum();
    ticks * 10_000
}

/// 1234567.8 -> "1,234,568".
pub fn thousands(x: f64) -> String {
    let digits = format!("{x:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `count` Redis stores at `urls` (a cluster's seeds when `cluster`), each
/// on connections of its own, as instances of a service are; checks that
/// meet a call in flight batched or not (`coalesce`).
pub async fn redis_instances(
    urls: &[String],
    cluster: bool,
    coalesce: bool,
    count: usize,
) -> Vec<limiter_redis::RedisStore> {
    use limiter_redis::{RedisConfig, RedisStore};
    let config = RedisConfig::new()
        .response_timeout(std::time::Duration::from_secs(5))
        .coalesce(coalesce);
    let mut stores = Vec::new();
    for _ in 0..count {
        let store = if cluster {
            RedisStore::connect_cluster(urls.iter().map(String::as_str), config.clone()).await
        } else {
            RedisStore::connect_with(&urls[0], config.clone()).await
        };
        stores.push(store.expect("connect the store"));
    }
    stores
}
