//! A flood of junk keys must not cost a real customer the quota, nor let
//! anyone past it. Each junk key spends its region's whole share at once
//! (one request of cost 10, the quota divided by the regions), 500 fresh
//! keys a second per region: as many requests for the other regions'
//! counts or unused shares a second per region, more than the cross-region
//! links answer at once. A real key's traffic from one region meanwhile
//! gets at least 70% of the quota, the quota is never passed, and no
//! decision waits on another region.
//!
//! Three `redis-server` processes, every link between two regions delayed
//! 40 ms each way by a proxy, a fixed window of 30 per second, junk from
//! two windows before the measured ones, real traffic at 100 requests a
//! second from north only (`regional_traffic`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::regional_share::{LOCAL_P99, share};
use crate::regional_traffic::{Plan, run};
use crate::regional_world::{ONE_AT_A_TIME, World, config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_busy_region_behind_junk_gets_seven_tenths_of_the_quota() {
    let what = "north alone behind junk, 40 ms each way";
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start(Duration::from_millis(40), config()).await;
    let plan = Plan {
        key: "lone-behind-junk",
        windows: 4,
        route: |_| 0,
        junk: true,
        events: Vec::new(),
        drain: Duration::from_secs(3),
    };
    let run = run(&world, &plan).await;
    run.print(what);
    run.assert_clean(what);
    // The load this is about: nearly every junk key sent (500 a second per
    // region, 3,000 over the two windows of lead and four measured).
    let junk_failed = run.junk_errors.load(Ordering::Relaxed);
    assert!(
        run.junk_sent >= 3 * 2_700 && junk_failed == 0,
        "{what}: the machine could not send the junk: {} sent, {} skipped, {junk_failed} failed",
        run.junk_sent,
        run.junk_skipped,
    );
    run.assert_at_most_the_quota(what);
    run.assert_p99_below(what, LOCAL_P99);
    run.assert_at_least(what, share(70), 1);
}
