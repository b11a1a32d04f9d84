//! A region cut off from the others keeps deciding on its own, and the
//! quota still holds across all three: per window, the cut-off region's
//! admissions plus the others' never pass it, before the cut, while cut
//! off (each side counting without the other) and after the links heal
//! (when everything held in the links meanwhile arrives at once, late).
//!
//! Three `redis-server` processes, every link between two regions delayed
//! 40 ms each way by a proxy, a fixed window of 30 per second, real
//! traffic at 100 requests a second spread evenly over the regions
//! (`regional_traffic`). South is cut off half way through window 1 (every
//! link to and from it holds its bytes, as a network dropping packets
//! does: calls time out) and back half way through window 3.

use std::time::Duration;

use limiter_regional::RegionalConfig;

use crate::regional_share::LOCAL_P99;
use crate::regional_traffic::{Event, Plan, Run, TICKS_PER_WINDOW, run};
use crate::regional_world::{ONE_AT_A_TIME, REGIONS, World, config};

const SOUTH: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_and_back_never_lets_the_quota_pass() {
    let what = "south cut off in windows 1 to 3";
    let _turn = ONE_AT_A_TIME.lock().await;
    // The default peer deadline: calls into the cut fail as in production.
    let config = config().peer_deadline(Duration::from_millis(300));
    let route = |tick| tick as usize % REGIONS;
    cut_off(what, config, ("cut-off", route), (SOUTH, 3, 6)).await;
}

/// `windows` windows of real traffic on `key`, routed by `route`, on a
/// world of `config` whose region `region` is cut off half way through
/// window 1 and back half way through window `back`: the run, checked
/// clean, its decisions made at once (the cut-off region's included),
/// within the quota.
pub(crate) async fn cut_off(
    what: &str,
    config: RegionalConfig,
    (key, route): (&'static str, fn(u64) -> usize),
    (region, back, windows): (usize, u64, u64),
) -> Run {
    let world = World::start(Duration::from_millis(40), config).await;
    let half = TICKS_PER_WINDOW / 2;
    let plan = Plan {
        key,
        windows,
        route,
        junk: false,
        events: vec![
            (TICKS_PER_WINDOW + half, Event::Partition(region)),
            (back * TICKS_PER_WINDOW + half, Event::Heal),
        ],
        drain: Duration::from_secs(3),
    };
    let run = run(&world, &plan).await;
    run.print(what);
    run.assert_clean(what);
    run.assert_p99_below(what, LOCAL_P99);
    run.assert_at_most_the_quota(what);
    run
}
