//! The UGC server's `GET /api/search` (30 a second per API key, one quota
//! across regions) as a customer in one region sees it: three `ugc`
//! processes, each on its own `redis-server`, every link between two
//! regions delayed 40 ms each way by a proxy, and a client sending 100
//! requests a second with one API key to north only, paced as a real
//! client: one every 10 ms, each on its own connection, whether or not the
//! ones before have been answered. Everything the server puts between the
//! request and the store (its guard, deny cache, failure policy, layers)
//! is in the path.
//!
//! Each response is counted in the second of the servers' clock (this
//! machine's) it was both sent and answered in; one sent in a second and
//! answered in the next counts in both for the bound and in neither for
//! the floor.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use limiter_tests::UgcServer;
use limiter_tests::http::{send, status_of};
use tokio::task::JoinSet;

use crate::regional_share::share;
use crate::regional_world::{NAMES, Network, ONE_AT_A_TIME, QUOTA, REGIONS, WINDOW_US, now_us};

const ONE_WAY: Duration = Duration::from_millis(40);
/// Whole windows measured.
const WINDOWS: u64 = 5;
const TICK_US: u64 = 10_000;

/// A `ugc` per region, each told of the others through the links.
fn start_servers(network: &Network) -> Vec<UgcServer> {
    (0..REGIONS)
        .map(|here| {
            let peers: Vec<String> = (0..REGIONS)
                .filter(|&there| there != here)
                .map(|there| format!("{}={}", NAMES[there], network.link_url(here, there)))
                .collect();
            UgcServer::start(&[
                ("REDIS_URL", network.server(here).url().as_str()),
                ("LIMITER_REGION", NAMES[here]),
                ("LIMITER_PEER_REGIONS", peers.join(",").as_str()),
            ])
        })
        .collect()
}

async fn search(server: std::net::SocketAddr, key: &'static str) -> u16 {
    status_of(
        server,
        "GET",
        "/api/search",
        &[("x-api-key", key.as_bytes())],
    )
    .await
}

/// One window's responses.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// 200s sent and answered within the window.
    admitted: u64,
    /// 200s sent in the window before or answered in the next.
    straddling: u64,
    /// 200s sent in this window and answered in the next: decided in one
    /// of the two.
    straddling_out: u64,
    denied: u64,
    other: u64,
}

/// The lines of `/metrics` about regions and the deny cache.
async fn region_metrics(server: &UgcServer) -> Vec<String> {
    let response = send(server.addr(), "GET", "/metrics", &[], b"")
        .await
        .expect("ugc answers");
    response
        .body
        .lines()
        .filter(|line| line.starts_with("limiter_region") || line.starts_with("limiter_deny"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ugc_api_search_from_one_region_gets_nine_tenths_of_the_quota() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let network = Network::start(|_, _| ONE_WAY).await;
    let servers = start_servers(&network);
    // Connected to its Redis and the other regions, scripts loaded: past
    // the quota of a key of its own in every region.
    for server in &servers {
        for _ in 0..QUOTA + 5 {
            search(server.addr(), "warm-up").await;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let north = servers[0].addr();
    let (wall, clock) = (now_us(), Instant::now());
    let first_window = (wall / WINDOW_US + 1) * WINDOW_US;
    let mut requests = JoinSet::new();
    // Each tick 1 ms into its 10 ms: a window's last request has 9 ms to be
    // answered within it, and none is sent on a window's edge.
    for tick in 0..WINDOWS * WINDOW_US / TICK_US {
        let due = first_window + tick * TICK_US + TICK_US / 10;
        tokio::time::sleep_until((clock + Duration::from_micros(due - wall)).into()).await;
        requests.spawn(async move {
            let sent = now_us();
            let status = search(north, "measured").await;
            (sent, now_us(), status)
        });
    }
    let mut windows: BTreeMap<u64, Tally> = BTreeMap::new();
    let mut latencies = Vec::new();
    while let Some(done) = requests.join_next().await {
        let (sent, answered, status) = done.unwrap();
        latencies.push(Duration::from_micros(answered - sent));
        let (from, to) = (sent - first_window, answered - first_window);
        let (from, to) = (from / WINDOW_US, to / WINDOW_US);
        let tally = windows.entry(from).or_default();
        match status {
            200 if from == to => tally.admitted += 1,
            200 => {
                tally.straddling += 1;
                tally.straddling_out += u64::from(to == from + 1);
                assert!(to <= from + 1, "a request answered two windows later");
                windows.entry(to).or_default().straddling += 1;
            }
            429 => tally.denied += 1,
            _ => tally.other += 1,
        }
    }
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100 - 1];
    eprintln!(
        "ugc, north alone, 40 ms each way: p99 {p99:?}, slowest {:?}",
        latencies.last()
    );
    for (window, tally) in &windows {
        eprintln!("  window {window}: {tally:?}");
    }
    for (name, server) in NAMES.iter().zip(&servers) {
        eprintln!("  {name}: {:?}", region_metrics(server).await);
    }

    let measured: Vec<&Tally> = (0..WINDOWS).map(|w| &windows[&w]).collect();
    assert!(
        measured.iter().all(|t| t.other == 0),
        "only 200 and 429: {windows:?}"
    );
    // A request answered within its window was decided in it; one sent
    // before a window's end and answered after it, in one of the two: so
    // at most the quota in each window, and at most twice the quota in two
    // adjacent windows with their straddlers. Seen from the client, one
    // admission too many at a window's edge could hide among the
    // straddlers; the regional_traffic tests count each window on the
    // store's own clock, where it cannot.
    assert!(
        measured.iter().all(|t| t.admitted <= QUOTA),
        "at most the quota, {QUOTA}, per window: {windows:?}"
    );
    assert!(
        measured
            .windows(2)
            .all(|pair| pair[0].admitted + pair[0].straddling_out + pair[1].admitted <= 2 * QUOTA),
        "at most twice the quota, {QUOTA}, in two adjacent windows: {windows:?}"
    );
    let floor = share(90);
    assert!(
        measured[1..].iter().all(|t| t.admitted >= floor),
        "at least {floor} of {QUOTA} in every window after the first: {windows:?}"
    );
}
