//! One quota across three regions (three `redis-server` processes, each
//! link between them delayed 30 to 80 ms each way by a proxy): traffic
//! skewed to one region, spread evenly, moving between regions, and a
//! region cut off mid-window and back. Per window: admitted at most the
//! quota plus the documented bound, never a denial before the quota is
//! used, one region's traffic exactly the quota, and local decisions never
//! waiting for another region.

#[path = "regions/world.rs"]
mod world;

use std::time::Duration;

use limiter_core::{
    Algorithm, BreakerConfig, Error, Limiter, MemoryStore, Policy, Region, RegionalConfig,
    RegionalStore, Rule, TierSize,
};
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
        // Seven tiers; the quota is reached on a round's last request, so
        // no denial finds it unannounced.
        assert_eq!(crossings, 7, "window {window}");
        // Two reads per sync; the first tier's sync tightens the other two
        // regions, the last announces the quota to them.
        assert_eq!(calls, 2 * 7 + 2 + 2, "window {window}");
        assert_eq!(after[0].exhausted_announced - before[0].exhausted_announced, 1);
    }
    assert!(
        traffic.p99() < SHORTEST_ROUND_TRIP,
        "local decisions waited for another region: p99 {:?}",
        traffic.p99()
    );
}
