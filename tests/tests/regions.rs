//! One quota across three regions (three `redis-server` processes, each
//! link between them delayed 30 to 80 ms each way by a proxy): traffic
//! skewed to one region, spread evenly, moving between regions, and a
//! region cut off mid-window and back. Per window: admitted at most the
//! quota plus the documented bound, never a denial before the quota is
//! used, one region's traffic exactly the quota, and local decisions never
//! waiting for another region.

#[path = "regions/ugc.rs"]
mod ugc;
#[path = "regions/world.rs"]
mod world;

use std::time::Duration;

use limiter_core::{Algorithm, BreakerConfig, Error, Limiter, MemoryStore, Policy, Rule};
use limiter_regional::{Region, RegionalConfig, RegionalStore, TierSize};
use limiter_tests::RedisServer;
use world::{QUOTA, REGIONS, ROUNDS, SHORTEST_ROUND_TRIP, Traffic, World, bound};

fn config(step_percent: u8) -> RegionalConfig {
    RegionalConfig::new()
        .step(TierSize::Percent(step_percent))
        // Generous for a loaded test machine: the slowest link's round
        // trip is 160 ms.
        .peer_deadline(Duration::from_secs(1))
        .connection_timeout(Duration::from_secs(2))
        .local_deadline(Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traffic_from_one_region_gets_exactly_the_quota() {
    // A step of 10%: tiers at 10, 13, ..., 28.
    let world = World::start(config(10)).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "skewed");
    for window in 0..3 {
        let before = world.stats();
        traffic.window(window, |_| [3, 0, 0]).await;
        let tally = &traffic.windows[&window];
        assert_eq!(tally.admitted, [QUOTA, 0, 0], "window {window}: {tally:?}");
        let after = world.stats();
        let crossings = after[0].tier_crossings - before[0].tier_crossings;
        let calls: u64 = (0..REGIONS)
            .map(|r| after[r].cross_region_calls() - before[r].cross_region_calls())
            .sum();
        // Seven tiers, each crossed once; a round's requests race, so a
        // check held while its region's sync is pending may ask for one
        // more sync (not a crossing).
        assert!(crossings >= 7, "window {window}: {crossings}");
        let syncs = after[0].syncs - before[0].syncs;
        // Two reads per sync; the first tier's sync tightens the other two
        // regions, the last announces the quota to them.
        assert_eq!(calls, 2 * syncs + 2 + 2, "window {window}");
        assert_eq!(
            after[0].exhausted_announced - before[0].exhausted_announced,
            1
        );
    }
    assert!(
        traffic.p99() < SHORTEST_ROUND_TRIP,
        "local decisions waited for another region: p99 {:?}",
        traffic.p99()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn even_traffic_stays_within_the_bound() {
    // A step of 1%: one request.
    let world = World::start(config(1)).await;
    let before = world.stats();
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "even");
    for window in 0..3 {
        traffic.window(window, |_| [1, 1, 1]).await;
        traffic.print();
        let tally = &traffic.windows[&window];
        assert!(
            tally.admitted() <= bound(1, 3),
            "window {window}: {tally:?}"
        );
        tally.assert_no_false_denial(window);
        // Every region reaches its first tier in the same round, when the
        // quota is used: their syncs find it used and announce it.
        assert_eq!(tally.admitted, [10, 10, 10], "window {window}: {tally:?}");
    }
    let stats = world.stats();
    // Every region learned of the full quota in every window: it announced
    // it, or a check noticed another region's announcement.
    for (region, (after, before)) in stats.iter().zip(&before).enumerate() {
        let learned = after.exhausted_received + after.exhausted_announced
            - before.exhausted_received
            - before.exhausted_announced;
        assert!(learned >= 3, "region {region}: {after:?}");
    }
    assert!(
        traffic.p99() < SHORTEST_ROUND_TRIP,
        "local decisions waited for another region: p99 {:?}",
        traffic.p99()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traffic_moving_to_another_region_mid_window_stays_within_the_bound() {
    let world = World::start(config(1)).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "moving");
    // North uses 28 of 30, then the traffic moves south; the next window
    // the other way round.
    let moving = |from: usize, to: usize| {
        move |round: u64| {
            let mut requests = [0; REGIONS];
            match round {
                0..9 => requests[from] = 3,
                9 => requests[from] = 1,
                _ => requests[to] = 3,
            }
            requests
        }
    };
    traffic.window(0, moving(0, 2)).await;
    traffic.window(1, moving(2, 0)).await;
    traffic.print();
    for (window, tally) in &traffic.windows {
        assert!(
            tally.admitted() <= bound(1, 3),
            "window {window}: {tally:?}"
        );
        assert!(tally.denied() > 0, "window {window}: {tally:?}");
        tally.assert_no_false_denial(*window);
    }
    // From its first tier (10) on, every request crosses a tier (a step of
    // 1) and a region whose sync is pending is held to one step past the
    // count it asked at: of each round's three requests, the third waits
    // for the sync (the test waits for it between rounds). So the first
    // region fills 10 in four rounds, then 2 a round: 22 when the traffic
    // moves.
    assert_eq!(traffic.windows[&0].admitted[0], 22);
    assert_eq!(traffic.windows[&1].admitted[2], 22);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_cut_off_mid_window_and_back() {
    let probe_interval = Duration::from_secs(1);
    let config = config(1)
        .peer_deadline(Duration::from_millis(300))
        .peer_breaker(BreakerConfig {
            failures_to_open: 3,
            probe_interval,
        });
    let world = World::start(config).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "cut");
    let south = 2;
    for round in 0..ROUNDS {
        if round == 5 {
            world.partition(south);
        }
        traffic.round(0, round, [1, 1, 1]).await;
    }
    traffic.window(1, |_| [1, 1, 1]).await;
    let cut_off = world.stats();
    world.heal();
    // Past the breakers' probe interval, so the next syncs try again.
    tokio::time::sleep(probe_interval + Duration::from_millis(200)).await;
    traffic.window(2, |_| [1, 1, 1]).await;

    traffic.print();
    for window in [0, 1] {
        let tally = &traffic.windows[&window];
        // Each side of the cut keeps its own count within the quota,
        // counting the other at what it last learned of it. Cut off before
        // any tier was reached, south learned nothing and taught nothing:
        // north and middle share the quota, south admits its 20 alone.
        assert_eq!(tally.admitted, [15, 15, 20], "window {window}: {tally:?}");
    }
    // Back together: one quota again.
    let healed = &traffic.windows[&2];
    assert!(healed.admitted() <= bound(1, 3), "{healed:?}");
    assert!(healed.denied() > 0, "{healed:?}");
    healed.assert_no_false_denial(2);

    for region in [0, south] {
        assert!(cut_off[region].remote_errors > 0, "{:?}", cut_off[region]);
    }
    assert!(
        traffic.p99() < SHORTEST_ROUND_TRIP,
        "local decisions waited for another region: p99 {:?}",
        traffic.p99()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sliding_window_counter_of_one_region_decides_as_in_a_single_region() {
    let world = World::start(config(5)).await;
    let policy = Traffic::sliding_window();
    let memory = MemoryStore::new();
    let window = 1_000_000;
    let base = 1_700_000_000_000_000 / window * window;
    // Bursts at chosen offsets across four windows.
    let times = [
        0, 10, 400_000, 700_000, 1_100_000, 1_300_000, 1_650_000, 2_500_000, 3_900_000,
    ];
    for (i, offset) in times.into_iter().enumerate() {
        for request in 0..12 {
            let now = base + offset + request;
            let ours = world.stores[0]
                .check_at("one", &policy, 1, now)
                .await
                .unwrap();
            let single = memory.check_at("one", &policy, 1, now).unwrap();
            assert_eq!(ours, single, "burst {i}, request {request}");
            // Each sync completes before the next request: a region whose
            // sync is pending is held to its share of what remains.
            world.idle().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sliding_window_counter_across_regions_stays_within_the_bound() {
    let world = World::start(config(1)).await;
    let mut traffic = Traffic::new(&world, Traffic::sliding_window(), "sliding");
    for window in 0..3 {
        traffic.window(window, |_| [1, 1, 1]).await;
    }
    traffic.print();
    for (window, tally) in &traffic.windows {
        // One more round: the first round of a window decides on the
        // previous window's counts as known, before its sync reads them.
        assert!(
            tally.admitted() <= bound(1, 3) + 3,
            "window {window}: {tally:?}"
        );
        assert!(tally.denied() > 0, "window {window}: {tally:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_on_redis_cluster_shares_the_quota_like_the_others() {
    let world = World::start_with_cluster(config(1)).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "cluster");
    traffic.window(0, |_| [3, 0, 0]).await;
    traffic.window(1, |_| [1, 1, 1]).await;
    traffic.print();
    assert_eq!(traffic.windows[&0].admitted, [QUOTA, 0, 0]);
    let even = &traffic.windows[&1];
    assert!(even.admitted() <= bound(1, 3), "{even:?}");
    even.assert_no_false_denial(1);
}

#[tokio::test]
async fn policies_that_cannot_be_shared_are_refused_before_any_call() {
    // Nothing listens there: the refusal comes first.
    let unused = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    let store = RegionalStore::new(
        Region::open("north", &unused).unwrap(),
        [Region::open("south", &unused).unwrap()],
    )
    .unwrap();
    let log = Policy::sliding_log([Rule::new(5, Duration::from_secs(1)).unwrap()]).unwrap();
    let error = Limiter::new(store).check("k", &log).await.unwrap_err();
    assert!(matches!(error, Error::Config(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the regional store runs fixed_window and sliding_window only, not sliding_log"
    );
    let _ = Algorithm::SlidingLog;
}

/// Sleeps past the next multiple of `window` if less than a sixth of it is
/// left, so a short test runs within one window of the servers' clock.
async fn wait_for_a_fresh_window(window: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let left = window.as_micros() - now.as_micros() % window.as_micros();
    let left = Duration::from_micros(left as u64);
    if left < window / 6 {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_limited_across_regions_answers_429_in_every_region() {
    use axum::Router;
    use axum::http::HeaderName;
    use axum::routing::get;
    use limiter_tests::http::{send, serve};
    use limiter_tower::{KeySource, LimitLayer, RateLimitLayer};

    let world = World::start(config(1)).await;
    let window = Duration::from_secs(60);
    let search = Policy::fixed_window(Rule::new(5, window).unwrap());
    let app = |region: usize| {
        let limit = LimitLayer::new(
            "search",
            search.clone(),
            KeySource::header(HeaderName::from_static("x-api-key")),
        );
        Router::new()
            .route("/api/search", get(|| async { "results" }).layer(limit))
            .layer(RateLimitLayer::new(Limiter::new(
                world.stores[region].clone(),
            )))
    };
    let (north, south) = (serve(app(0)).await, serve(app(2)).await);
    // Decided on the servers' clock: the whole test within one window.
    wait_for_a_fresh_window(window).await;
    let mut statuses = Vec::new();
    for addr in [north, north, north, south, south, south, north] {
        let response = send(addr, "GET", "/api/search", &[("x-api-key", b"k1")], b"")
            .await
            .unwrap();
        if response.status == 429 {
            let retry_after: u64 = response.header("retry-after").parse().unwrap();
            assert!((1..=60).contains(&retry_after), "{response:#?}");
        }
        statuses.push(response.status);
        world.idle().await;
    }
    // North's three reach its tiers without telling anyone; south learns
    // them at its first tier, fills the quota and announces it to north.
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    // Another key has its own quota.
    let other = send(north, "GET", "/api/search", &[("x-api-key", b"k2")], b"").await;
    assert_eq!(other.unwrap().status, 200);
}
