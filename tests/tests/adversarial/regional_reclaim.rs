//! The share of a region cut off goes to the others after a stated time,
//! and comes back when the region does, without the quota ever passing:
//! the cut-off region stops spending its share once it has been out of
//! touch with most regions for the lapse (a quarter of `reclaim_after`),
//! and the others, a majority that has not heard from it for
//! `reclaim_after`, take it in the windows that start from then on.
//!
//! Three `redis-server` processes, every link between two regions delayed
//! 40 ms each way by a proxy, a fixed window of 30 per second, real
//! traffic at 100 requests a second from middle and south only (north
//! idle: it gives them its share while they can reach it), and
//! `reclaim_after` of 2 s. North is cut off half way through window 1 and
//! back half way through window 5.
//!
//! - Windows 2 and 3: north cannot be asked; middle and south spend their
//!   own shares, 20.
//! - Windows 4 and 5 (the first to start 2 s after they last heard from
//!   north, until it is back): they take north's share, 30.
//! - Window 6 starts less than a lapse and 100 ms after north came back:
//!   north does not count itself in touch yet, and the others no longer
//!   take its share (they heard from it): 20.
//! - Window 7: north is back and gives its share again, 30.

use std::time::Duration;

use crate::regional_partition::cut_off;
use crate::regional_traffic::Run;
use crate::regional_world::{ONE_AT_A_TIME, QUOTA, config};

const NORTH: usize = 0;

/// 8 windows of traffic routed by `route`, north cut off half way through
/// window 1 and back half way through window 5, `reclaim_after` 2 s: the
/// run, checked clean, local and within the quota.
async fn north_cut_off(what: &str, key: &'static str, route: fn(u64) -> usize) -> Run {
    let config = config()
        .peer_deadline(Duration::from_millis(300))
        .reclaim_after(Duration::from_secs(2));
    cut_off(what, config, (key, route), (NORTH, 5, 8)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_share_of_a_region_cut_off_goes_to_the_others_and_comes_back() {
    let what = "north cut off in windows 1 to 5, middle and south busy";
    let _turn = ONE_AT_A_TIME.lock().await;
    let run = north_cut_off(what, "reclaim", |tick| 1 + tick as usize % 2).await;
    let admitted = run.per_window();
    let cut_off = QUOTA - QUOTA / 3;
    assert_eq!(
        admitted,
        [QUOTA, QUOTA, cut_off, cut_off, QUOTA, QUOTA, cut_off, QUOTA],
        "{what}"
    );
}

/// North busy too: cut off, it spends its share until the lapse, then
/// nothing; the others take it once a majority has not heard from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_region_cut_off_stops_spending_its_share_before_the_others_take_it() {
    let what = "north cut off in windows 1 to 5, every region busy";
    let _turn = ONE_AT_A_TIME.lock().await;
    let run = north_cut_off(what, "reclaim-busy", |tick| tick as usize % 3).await;
    let by_region = |window: u64| run.admitted.get(&window).copied().unwrap_or_default();
    // Every region needs its share at 33 a second: nobody gives.
    assert_eq!(by_region(0), [10, 10, 10], "{what}");
    // Out of touch with both others since 1.5 s (the lapse is 0.5 s):
    // north spends nothing; the others hold their own.
    assert_eq!(by_region(3), [0, 10, 10], "{what}");
    // Then they take north's share, half each.
    assert_eq!(by_region(4), [0, 15, 15], "{what}");
    assert_eq!(by_region(5)[0], 0, "{what}");
    // Back in touch for a whole window: shares as before.
    assert_eq!(by_region(7), [10, 10, 10], "{what}");
}
