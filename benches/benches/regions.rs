//! One quota across regions: leases of each window's quota
//! (`RegionalStore`) beside the seed's two rejected answers, on the same
//! traffic:
//! - each region limited to quota / regions on its own Redis ("split");
//! - every region deciding on one central Redis ("central").
//!
//! Two and three regions, each a `redis-server` on this machine, the links
//! between them delayed by the test harness's proxy (north–middle 30 ms,
//! middle–south 55 ms, north–south 80 ms, each way). Traffic is open loop,
//! 1.5 times the quota, spread evenly, 90% from north, or all from north,
//! decided on the servers' clocks in real windows. Per window:
//! over-admission (admitted beyond the quota), false denials (denied while
//! the quota was not used), cross-region calls per request, and the
//! decisions' latency; then, for the leases, what their asks did.
//!
//! `cargo bench -p limiter-benches --bench regions` (needs `redis-server`;
//! about two and a half minutes).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use limiter_core::{Key, Policy, Rule, Store};
use limiter_regional::{Region, RegionStats, RegionalConfig, RegionalStore};
use limiter_tests::RedisServer;
use limiter_tests::proxy::LatencyProxy;

const NAMES: [&str; 3] = ["north", "middle", "south"];
const QUOTA: u64 = 300;
const WINDOW: Duration = Duration::from_secs(3);
/// Windows measured per run.
const WINDOWS: u64 = 2;
/// Requests offered per window, all regions together: 1.5 times the quota.
const OFFERED: u64 = QUOTA * 3 / 2;

fn one_way(a: usize, b: usize) -> Duration {
    match (a.min(b), a.max(b)) {
        (0, 1) => Duration::from_millis(30),
        (1, 2) => Duration::from_millis(55),
        _ => Duration::from_millis(80),
    }
}

/// The machine's regions: a Redis each, a proxy on each link.
struct Regions {
    servers: Vec<RedisServer>,
    links: BTreeMap<(usize, usize), LatencyProxy>,
}

impl Regions {
    async fn start() -> Self {
        let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
        let mut links = BTreeMap::new();
        for from in 0..3 {
            for to in (0..3).filter(|&to| to != from) {
                let target = ([127, 0, 0, 1], servers[to].port()).into();
                links.insert(
                    (from, to),
                    LatencyProxy::start(target, one_way(from, to)).await,
                );
            }
        }
        Self { servers, links }
    }

    /// How region `from` reaches region `to`'s Redis.
    fn url(&self, from: usize, to: usize) -> String {
        if from == to {
            self.servers[to].url()
        } else {
            self.links[&(from, to)].url()
        }
    }

    /// One store per region (of the first `n`) for `scheme`.
    fn stores(&self, n: usize, scheme: Scheme) -> Vec<RegionalStore> {
        (0..n)
            .map(|here| {
                let region = |there: usize| Region::open(NAMES[there], &self.url(here, there));
                // A deadline that outlasts a cross-country round trip (the
                // central Redis) and this machine's hiccups: latency is
                // measured, not cut.
                let config = RegionalConfig::new().local_deadline(Duration::from_secs(1));
                match scheme {
                    Scheme::Leased => {
                        let peers = (0..n).filter(|&t| t != here).map(|t| region(t).unwrap());
                        RegionalStore::with_config(region(here).unwrap(), peers, config)
                    }
                    // A regional store without peers is one Redis's aligned
                    // fixed window: the same counting, no sharing.
                    Scheme::Split => RegionalStore::with_config(region(here).unwrap(), [], config),
                    Scheme::Central => RegionalStore::with_config(region(0).unwrap(), [], config),
                }
                .unwrap()
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy)]
enum Scheme {
    /// Every region holds a lease of each window's quota and asks the
    /// others for their spare shares.
    Leased,
    Split,
    Central,
}

impl Scheme {
    fn name(self) -> &'static str {
        match self {
            Self::Leased => "leased",
            Self::Split => "split: quota / regions each",
            Self::Central => "one central Redis (north)",
        }
    }

    fn quota(self, n: usize) -> u64 {
        match self {
            Self::Split => QUOTA / n as u64,
            _ => QUOTA,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Traffic {
    Even,
    /// 90% from north, the rest spread over the others.
    Skewed,
    /// All from north: the others' shares idle.
    NorthOnly,
}

impl Traffic {
    fn name(self) -> &'static str {
        match self {
            Self::Even => "even",
            Self::Skewed => "90% north",
            Self::NorthOnly => "north only",
        }
    }

    /// Requests per window from each of `n` regions.
    fn per_region(self, n: usize) -> Vec<u64> {
        let north = match self {
            Self::Even => return vec![OFFERED / n as u64; n],
            Self::Skewed => OFFERED * 9 / 10,
            Self::NorthOnly => OFFERED,
        };
        let rest = (OFFERED - north) / (n as u64 - 1);
        std::iter::once(north)
            .chain(std::iter::repeat_n(rest, n - 1))
            .collect()
    }
}

/// One decision: its region, its window (the index of the window's end),
/// whether it passed (`None`: the store failed), and how long the caller
/// waited.
struct Record {
    region: usize,
    window: u64,
    allowed: Option<bool>,
    took: Duration,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

/// Runs `traffic` for `WINDOWS` whole windows from the next window's start;
/// returns every decision.
async fn run(stores: &[RegionalStore], scheme: Scheme, traffic: Traffic, key: &str) -> Vec<Record> {
    let n = stores.len();
    let w = WINDOW.as_micros() as u64;
    let policy = Policy::fixed_window(Rule::new(scheme.quota(n), WINDOW).unwrap());
    let start_us = (now_us() / w + 1) * w;
    let start = Instant::now() + Duration::from_micros(start_us - now_us());
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut generators = Vec::new();
    for (region, per_window) in traffic.per_region(n).into_iter().enumerate() {
        if per_window == 0 {
            continue;
        }
        let store = stores[region].clone();
        let (policy, key, records) = (policy.clone(), Key::from(key), Arc::clone(&records));
        let interval = WINDOW / per_window as u32;
        generators.push(tokio::spawn(async move {
            let mut checks = Vec::new();
            for i in 0..per_window * WINDOWS {
                // Regions offset by a fraction of an interval, so their
                // arrivals do not coincide.
                let due = start + interval * i as u32 + interval * region as u32 / 3;
                tokio::time::sleep_until(due.into()).await;
                let (store, policy, key) = (store.clone(), policy.clone(), key.clone());
                let records = Arc::clone(&records);
                checks.push(tokio::spawn(async move {
                    let asked = Instant::now();
                    let decision = store.check(&key, &policy, 1).await;
                    let took = asked.elapsed();
                    // The window's end by the deciding server's clock, give
                    // or take the reply's way back: rounded to whole windows.
                    let decided = now_us() - took.as_micros() as u64 / 2;
                    let reset_after = decision.as_ref().map_or(0, |d| d.reset_after().as_micros());
                    let window = (decided + reset_after as u64 + w / 2) / w;
                    records.lock().unwrap().push(Record {
                        region,
                        window,
                        allowed: decision.ok().map(|d| d.allowed()),
                        took,
                    });
                }));
            }
            for check in checks {
                check.await.expect("a check");
            }
        }));
    }
    for generator in generators {
        generator.await.expect("a generator");
    }
    for store in stores {
        store.idle().await;
    }
    let first = start_us / w + 1;
    let mut records = std::mem::take(&mut *records.lock().unwrap());
    records.retain(|r| (first..first + WINDOWS).contains(&r.window));
    records
}

/// Connects every store to every region before measuring: a quota of one,
/// spent at once, sets off an ask that calls every other region and this
/// one. A key of its own per run, so no earlier run's ask holds it back.
async fn warm_up(stores: &[RegionalStore], key: &str) {
    let policy = Policy::fixed_window(Rule::new(1, WINDOW).unwrap());
    let key = Key::from(key);
    for store in stores {
        for _ in 0..2 {
            store.check(&key, &policy, 1).await.expect("a decision");
        }
        store.idle().await;
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p).div_ceil(100).max(1) - 1]
}

/// What the stores' asks did over a run, all regions together.
#[derive(Debug, Clone, Copy)]
struct Asks {
    asks: u64,
    received: u64,
    denied_while_asking: u64,
    /// Asks dropped (too many keys waiting) or expired (their window over).
    not_run: u64,
    cross_region_calls: u64,
    remote_errors: u64,
}

impl Asks {
    /// What the asks did between two snapshots of the stores' stats.
    fn between(before: &[RegionStats], after: &[RegionStats]) -> Self {
        let total = |field: fn(&RegionStats) -> u64| -> u64 {
            after
                .iter()
                .zip(before)
                .map(|(a, b)| field(a) - field(b))
                .sum()
        };
        Self {
            asks: total(|s| s.asks),
            received: total(|s| s.received),
            denied_while_asking: total(|s| s.denied_while_asking),
            not_run: total(|s| s.asks_dropped + s.asks_expired),
            cross_region_calls: total(|s| s.cross_region_calls),
            remote_errors: total(|s| s.remote_errors),
        }
    }

    /// A row of the asks' table, per window measured.
    fn row(self, n: usize, traffic: Traffic) -> String {
        let per_window = |count: u64| count as f64 / WINDOWS as f64;
        format!(
            "| {n} | {} | {:.1} | {:.1} | {:.1} | {} | {} |",
            traffic.name(),
            per_window(self.asks),
            per_window(self.received),
            per_window(self.denied_while_asking),
            self.not_run,
            self.remote_errors,
        )
    }
}

fn row(n: usize, scheme: Scheme, traffic: Traffic, records: &[Record], asks: Asks) {
    let mut windows: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for record in records {
        let (admitted, denied) = windows.entry(record.window).or_default();
        match record.allowed {
            Some(true) => *admitted += 1,
            Some(false) => *denied += 1,
            None => {}
        }
    }
    let errors = records.iter().filter(|r| r.allowed.is_none()).count();
    let admitted: Vec<u64> = windows.values().map(|w| w.0).collect();
    let over = admitted
        .iter()
        .map(|&a| a.saturating_sub(QUOTA))
        .max()
        .unwrap_or(0);
    // Denied while the quota had room: at most the room left.
    let false_denials: u64 = windows
        .values()
        .map(|&(admitted, denied)| denied.min(QUOTA.saturating_sub(admitted)))
        .sum();
    let calls = match scheme {
        Scheme::Leased => format!(
            "{:.3}",
            asks.cross_region_calls as f64 / records.len() as f64
        ),
        // Every decision outside north crosses to north's Redis.
        Scheme::Central => {
            let off_north = records.iter().filter(|r| r.region != 0).count();
            format!("{:.3}", off_north as f64 / records.len() as f64)
        }
        Scheme::Split => "0".into(),
    };
    let mut all: Vec<Duration> = records.iter().map(|r| r.took).collect();
    all.sort();
    let medians: Vec<String> = (0..n)
        .map(|region| {
            let mut took: Vec<Duration> = records
                .iter()
                .filter(|r| r.region == region)
                .map(|r| r.took)
                .collect();
            took.sort();
            if took.is_empty() {
                "-".to_owned()
            } else {
                format!("{:.1}", percentile(&took, 50).as_secs_f64() * 1e3)
            }
        })
        .collect();
    println!(
        "| {n} | {} | {} | {} | {over} | {:.1} | {calls} | {} | {:.1} | {errors} |",
        scheme.name(),
        traffic.name(),
        admitted
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        false_denials as f64 / windows.len().max(1) as f64,
        medians.join(" / "),
        percentile(&all, 99).as_secs_f64() * 1e3,
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let regions = Regions::start().await;
        println!(
            "quota {QUOTA} per {WINDOW:?} window, {OFFERED} offered per window, {WINDOWS} windows per row"
        );
        println!();
        println!(
            "| regions | scheme | traffic | admitted per window | over-admission (max) | false denials per window | cross-region calls per request | decision p50 per region (ms) | decision p99 (ms) | errors |"
        );
        println!("|---:|---|---|---|---:|---:|---:|---|---:|---:|");
        let mut run_id = 0;
        let mut ask_rows = Vec::new();
        for n in [2, 3] {
            for traffic in [Traffic::Even, Traffic::Skewed, Traffic::NorthOnly] {
                for scheme in [Scheme::Leased, Scheme::Split, Scheme::Central] {
                    let stores = regions.stores(n, scheme);
                    run_id += 1;
                    warm_up(&stores, &format!("warm-up:{run_id}")).await;
                    let stats = || stores.iter().map(RegionalStore::stats).collect::<Vec<_>>();
                    let before = stats();
                    let key = format!("bench:{run_id}");
                    let records = run(&stores, scheme, traffic, &key).await;
                    let asks = Asks::between(&before, &stats());
                    row(n, scheme, traffic, &records, asks);
                    if let Scheme::Leased = scheme {
                        ask_rows.push(asks.row(n, traffic));
                    }
                }
            }
        }
        println!();
        println!("The leases' asks, all regions together, per window measured:");
        println!();
        println!(
            "| regions | traffic | asks | received | denied while asking | asks dropped or expired (run) | remote errors (run) |"
        );
        println!("|---:|---|---:|---:|---:|---:|---:|");
        for ask_row in ask_rows {
            println!("{ask_row}");
        }
    });
}
