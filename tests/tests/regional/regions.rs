//! One quota across three regions (three `redis-server` processes, each
//! link between them delayed 30 to 80 ms each way by a proxy): traffic
//! skewed to one region, spread evenly, moving between regions, and a
//! region cut off mid-window and back. Per window: never more than the
//! quota, one region's traffic exactly the quota, and local decisions
//! never waiting for another region.

#[path = "regions/ugc.rs"]
mod ugc;
#[path = "regions/world.rs"]
mod world;

use std::time::Duration;

use limiter_core::{Algorithm, BreakerConfig, Error, Limiter, Policy, Rule};
use limiter_regional::{Region, RegionalConfig, RegionalStore};
use limiter_tests::RedisServer;
use world::{QUOTA, REGIONS, ROUNDS, Traffic, World};

fn config() -> RegionalConfig {
    RegionalConfig::new()
        // Generous for a loaded test machine: the slowest link's round
        // trip is 160 ms.
        .peer_deadline(Duration::from_secs(1))
        .connection_timeout(Duration::from_secs(2))
        .local_deadline(Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traffic_from_one_region_gets_exactly_the_quota() {
    let world = World::start(config()).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "skewed");
    for window in 0..3 {
        let before = world.stats();
        traffic.window(window, |_| [3, 0, 0]).await;
        let tally = &traffic.windows[&window];
        assert_eq!(tally.admitted, [QUOTA, 0, 0], "window {window}: {tally:?}");
        let after = world.stats();
        // North asked; the others gave it their shares and asked nothing.
        let asks: Vec<u64> = (0..REGIONS)
            .map(|r| after[r].asks - before[r].asks)
            .collect();
        assert!(
            asks[0] >= 1 && asks[1..] == [0, 0],
            "window {window}: {asks:?}"
        );
        assert_eq!(
            after[0].received - before[0].received,
            20,
            "window {window}"
        );
        // One call to each other region per ask, none on a request's path.
        let calls = after[0].cross_region_calls - before[0].cross_region_calls;
        assert_eq!(calls, 2 * asks[0], "window {window}");
    }
    traffic.assert_local();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn even_traffic_gets_exactly_the_quota_each_region_its_share() {
    let world = World::start(config()).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "even");
    for window in 0..3 {
        traffic.window(window, |_| [1, 1, 1]).await;
        let tally = &traffic.windows[&window];
        // Every region needs its whole share: none gives any away.
        assert_eq!(tally.admitted, [10, 10, 10], "window {window}: {tally:?}");
        tally.assert_no_false_denial(window);
    }
    traffic.print();
    traffic.assert_local();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn traffic_moving_to_another_region_gets_the_quota_there_the_next_window() {
    let world = World::start(config()).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "moving");
    // North's traffic moves south halfway through window 0, and stays there.
    traffic
        .window(0, |round| if round < 10 { [3, 0, 0] } else { [0, 0, 3] })
        .await;
    for window in 1..3 {
        traffic.window(window, |_| [0, 0, 3]).await;
    }
    traffic.print();
    // Window 0: north asked for and got every share, and used it all
    // before the move; south then had none left to get.
    assert_eq!(traffic.windows[&0].admitted, [QUOTA, 0, 0]);
    // From the next window on, south holds the quota again.
    for window in 1..3 {
        let tally = &traffic.windows[&window];
        assert_eq!(tally.admitted, [0, 0, QUOTA], "window {window}: {tally:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_cut_off_mid_window_keeps_its_share_and_rejoins_without_over_admission() {
    let probe_interval = Duration::from_secs(1);
    let config = config()
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
        traffic.round(0, round, [3, 1, 1]).await;
    }
    traffic.window(1, |_| [3, 1, 1]).await;
    let cut_off = world.stats();
    world.heal();
    // Past the breakers' probe interval, so the next asks try again.
    tokio::time::sleep(probe_interval + Duration::from_millis(200)).await;
    traffic.window(2, |_| [3, 1, 1]).await;

    traffic.print();
    for window in 0..3 {
        let tally = &traffic.windows[&window];
        // Every region needs its share at this load (middle and south 20
        // a window, north 60): nobody gives, cut off or not, and never
        // more than the quota passes.
        assert_eq!(tally.admitted, [10, 10, 10], "window {window}: {tally:?}");
    }
    for region in [0, south] {
        assert!(cut_off[region].remote_errors > 0, "{:?}", cut_off[region]);
    }
    traffic.assert_local();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sliding_window_counter_of_one_region_decides_as_in_a_single_region() {
    let world = World::start(config()).await;
    let policy = Traffic::sliding_window();
    let memory = limiter_tests::at::At::memory();
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
            // A window's first request may find north's share short of the
            // previous window's weight until its ask is answered (before the
            // next request here): denied, it is not counted, so the single
            // region does not count it either. Every other verdict is the
            // single region's.
            if request == 0 && !ours.allowed() {
                world.idle().await;
                continue;
            }
            let single = memory.decide_at("one", &policy, 1, now).unwrap();
            assert_eq!(
                ours.allowed(),
                single.allowed(),
                "burst {i}, request {request}"
            );
            world.idle().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sliding_window_counter_across_regions_never_passes_the_quota() {
    let world = World::start(config()).await;
    let mut traffic = Traffic::new(&world, Traffic::sliding_window(), "sliding");
    for window in 0..3 {
        traffic
            .window(window, |round| [2, 1, u64::from(round % 2 == 0)])
            .await;
    }
    traffic.print();
    for (window, tally) in &traffic.windows {
        // Counted within a window, as the estimate counts it whole.
        assert!(tally.admitted() <= QUOTA, "window {window}: {tally:?}");
        assert!(tally.denied() > 0, "window {window}: {tally:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_on_redis_cluster_shares_the_quota_like_the_others() {
    let world = World::start_with_cluster(config()).await;
    let mut traffic = Traffic::new(&world, Traffic::fixed_window(), "cluster");
    traffic.window(0, |_| [3, 0, 0]).await;
    traffic.window(1, |_| [1, 1, 1]).await;
    traffic.window(2, |_| [0, 3, 0]).await;
    traffic.print();
    assert_eq!(traffic.windows[&0].admitted, [QUOTA, 0, 0]);
    assert_eq!(traffic.windows[&1].admitted, [10, 10, 10]);
    // North gives its share to middle from the Cluster.
    assert_eq!(traffic.windows[&2].admitted, [0, QUOTA, 0]);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_limited_across_regions_answers_429_in_every_region() {
    use axum::Router;
    use axum::http::HeaderName;
    use axum::routing::get;
    use limiter_tests::http::{send, serve};
    use limiter_tower::{KeySource, LimitLayer, LimiterLayer};

    let world = World::start(config()).await;
    let window = Duration::from_secs(6);
    let search = Policy::fixed_window(Rule::new(5, window).unwrap());
    let app = |region: usize| {
        let limit = LimitLayer::new(
            "search",
            search.clone(),
            KeySource::header(HeaderName::from_static("x-api-key")),
        );
        Router::new()
            .route("/api/search", get(|| async { "results" }).layer(limit))
            .layer(LimiterLayer::new(Limiter::new(
                world.stores[region].store.clone(),
            )))
    };
    let (north, south) = (serve(app(0)).await, serve(app(2)).await);
    // Decided on the world's clock, which stands still: the whole test
    // within one window.
    let mut statuses = Vec::new();
    for addr in [north, north, north, north, north, north, south] {
        let response = send(addr, "GET", "/api/search", &[("x-api-key", b"k1")], b"")
            .await
            .unwrap();
        if response.status == 429 {
            let retry_after: u64 = response.header("retry-after").parse().unwrap();
            assert!((1..=6).contains(&retry_after), "{response:#?}");
        }
        statuses.push(response.status);
        world.idle().await;
    }
    // North's first request asks for the others' shares (2 and 1, its own
    // 2): its demand will outrun its share. Then the whole quota passes
    // there, and the others have none left this window.
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    // Another key has its own quota.
    let other = send(north, "GET", "/api/search", &[("x-api-key", b"k2")], b"").await;
    assert_eq!(other.unwrap().status, 200);
}
