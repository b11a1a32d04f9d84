//! One quota across three regions must hold when the asks back up: a
//! flood of junk keys, each spending its region's whole share at once and
//! so asking the others for theirs, 500 fresh keys a second per region.
//! Every region would decide on its own share meanwhile (never past it),
//! and an ask of a window that is over would still run, keeping the queue
//! long.
//!
//! Three `redis-server` processes, every link between two regions delayed
//! 40 ms each way by a proxy, the default `RegionalConfig`, a fixed window
//! of 30 per second, windows aligned to whole seconds of the servers'
//! clock (this machine's). Real traffic runs at 100 requests a second, 10
//! ms apart, spread evenly over the regions for four whole windows, each
//! admission counted in the window its decision was made in
//! (`regional_traffic`). Per window never more than the quota passes, with
//! or without junk. (Traffic from one region behind the junk:
//! `regional_share_behind_junk`.)

use std::time::Duration;

use crate::regional_traffic::{Plan, Run, run};
use crate::regional_world::{NAMES, ONE_AT_A_TIME, REGIONS, World, config};

const ONE_WAY: Duration = Duration::from_millis(40);
/// Whole windows measured.
const WINDOWS: u64 = 4;

/// Round robin over the regions.
fn even(tick: u64) -> usize {
    tick as usize % REGIONS
}

fn plan(key: &'static str, junk: bool, drain: Duration) -> Plan {
    Plan {
        key,
        windows: WINDOWS,
        route: even,
        junk,
        events: Vec::new(),
        drain,
    }
}

/// The asks' own figures beside the run's.
fn print(run: &Run, what: &str) {
    run.print(what);
    let regions = NAMES.iter().zip(&run.stats_before).zip(&run.stats_after);
    for ((name, b), a) in regions {
        eprintln!(
            "  {}: over the measured windows {} asks run, {} dropped, {} expired, {} received, \
             {} remote errors",
            name,
            a.asks - b.asks,
            a.asks_dropped - b.asks_dropped,
            a.asks_expired - b.asks_expired,
            a.received - b.received,
            a.remote_errors - b.remote_errors,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_traffic_never_passes_the_quota_behind_slow_links() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start(ONE_WAY, config()).await;
    let run = run(&world, &plan("spread", false, Duration::from_secs(2))).await;
    print(&run, "spread evenly, no junk");
    run.assert_clean("spread evenly");
    run.assert_at_most_the_quota("spread evenly");
    // 33 a second per region, 10 a share: every region needs its own.
    assert_eq!(run.per_window(), [30; WINDOWS as usize], "spread evenly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_traffic_never_passes_the_quota_behind_a_backlog_of_junk_asks() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start(ONE_WAY, config()).await;
    let run = run(
        &world,
        &plan("spread-behind-junk", true, Duration::from_secs(3)),
    )
    .await;
    print(&run, "spread evenly, behind junk");
    // The load this is about: every region's junk asked 400 times a second
    // or more (its checks can only ask once each).
    for ((name, before), after) in NAMES.iter().zip(&run.stats_before).zip(&run.stats_after) {
        let asks = after.asks + after.asks_dropped + after.asks_expired
            - before.asks
            - before.asks_dropped
            - before.asks_expired;
        assert!(
            asks >= 400 * WINDOWS,
            "{name}: only {asks} asks in {WINDOWS} s: the machine could not send the junk"
        );
    }
    run.assert_clean("spread evenly behind junk");
    run.assert_at_most_the_quota("spread evenly behind junk");
    // An ask of a window that is over is dropped, not run: once the traffic
    // stops, what is left ends within a window and a round trip or two.
    for (name, drained) in NAMES.iter().zip(&run.drained_after) {
        assert!(
            drained.is_some_and(|d| d <= Duration::from_secs(2)),
            "{name}: asks still ran {drained:?} after the traffic stopped"
        );
    }
}
