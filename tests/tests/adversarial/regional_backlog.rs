//! One quota across three regions must hold when the syncs back up. Each
//! region's syncs run `sync_concurrency` (32) at once, each waiting a
//! cross-region round trip (two, when it tightens the others' tiers): a
//! flood of junk keys that each cross their first tier queues more syncs
//! than that clears, and a real key's sync then waits behind them for
//! longer than its window. Every region would decide on its own count
//! meanwhile, three quotas a window; a sync of a window that is over would
//! still run, keeping the queue long.
//!
//! Three `redis-server` processes, every link between two regions delayed
//! 40 ms each way by a proxy, the default `RegionalConfig` (tiers, step,
//! concurrency), a fixed window of 30 per second, windows aligned to whole
//! seconds of the servers' clock (this machine's). Real traffic runs at
//! 100 requests a second, 10 ms apart, for four whole windows; each
//! admission is counted in the window its decision was made in (from the
//! decision's `reset_after`: the window ends at a whole second, between the
//! request's sending plus `reset_after` and its answer plus `reset_after`).
//! Per window at most `quota + regions × step` pass, with or without junk;
//! traffic from one region still gets at least 90% of the quota.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use limiter_core::{Decision, Error, Policy, Rule, Store};
use limiter_regional::{Region, RegionStats, RegionalConfig, RegionalStore, TierSize};
use limiter_tests::RedisServer;
use limiter_tests::proxy::LatencyProxy;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const NAMES: [&str; 3] = ["north", "middle", "south"];
const REGIONS: usize = NAMES.len();
const QUOTA: u64 = 30;
const WINDOW_US: u64 = 1_000_000;
const ONE_WAY: Duration = Duration::from_millis(40);
/// Whole windows measured.
const WINDOWS: u64 = 4;
/// One real request per tick: 100 a second.
const TICK: Duration = Duration::from_millis(10);
const TICKS_PER_WINDOW: u64 = WINDOW_US / TICK.as_micros() as u64;
/// Junk per region and tick: fresh keys, each sent `JUNK_REQUESTS` requests
/// of `JUNK_COST` at once, which cross its first tier (the quota divided by
/// the regions: 10). One request of cost 10 crosses it as ten of cost 1
/// do, at a tenth of the requests: 500 requests and 500 first-tier
/// crossings a second per region, more than 32 syncs at once clear at a
/// round trip or two of 80 ms each, and as much as a 2-core machine sends
/// beside three Redis servers and six proxies (at 3,000 requests a second
/// per region it sent 1,236 and answered checks up to 2.5 s late).
const JUNK_KEYS: u64 = 5;
const JUNK_REQUESTS: u64 = 1;
const JUNK_COST: u64 = 10;
/// Junk runs this long before the first measured window, so its backlog
/// is already there.
const JUNK_LEAD: u64 = 2;
/// Junk requests in flight at most; past it a junk request is not sent.
const JUNK_IN_FLIGHT: usize = 4_096;

/// One world at a time: three Redis servers and six proxies under load are
/// all a 2-core machine can run. Other timed tests of regions take it too.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn config() -> RegionalConfig {
    // The default tiers, step and sync concurrency: what is tested.
    // Deadlines generous for a loaded test machine, so no check fails and
    // no region's breaker opens: only the syncs' queue is late.
    RegionalConfig::new()
        .local_deadline(Duration::from_secs(5))
        .peer_deadline(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(2))
}

/// The default step in requests, resolved as the store resolves it
/// (`TierSize::resolve`): a percentage of the quota, rounded down, at
/// least one request.
fn step() -> u64 {
    match RegionalConfig::default().step_size() {
        TierSize::Percent(percent) => (QUOTA * u64::from(percent) / 100).max(1),
        other => panic!("the default step is a percentage, not {other:?}"),
    }
}

/// The documented bound on one window's admissions: the quota and a step
/// per region.
fn bound() -> u64 {
    QUOTA + REGIONS as u64 * step()
}

fn policy() -> Policy {
    Policy::fixed_window(Rule::new(QUOTA, Duration::from_micros(WINDOW_US)).unwrap())
}

struct World {
    _servers: Vec<RedisServer>,
    _links: Vec<LatencyProxy>,
    stores: Vec<RegionalStore>,
}

impl World {
    async fn start() -> Self {
        let servers: Vec<RedisServer> = (0..REGIONS).map(|_| RedisServer::start()).collect();
        let mut links = Vec::new();
        let mut stores = Vec::new();
        for here in 0..REGIONS {
            let mut peers = Vec::new();
            for there in (0..REGIONS).filter(|&there| there != here) {
                let target = ([127, 0, 0, 1], servers[there].port()).into();
                let link = LatencyProxy::start(target, ONE_WAY).await;
                peers.push(Region::open(NAMES[there], &link.url()).unwrap());
                links.push(link);
            }
            let local = Region::open(NAMES[here], &servers[here].url()).unwrap();
            stores.push(RegionalStore::with_config(local, peers, config()).unwrap());
        }
        // Connected to every region and scripts loaded: a quota of one,
        // crossed at once, syncs.
        let warm_up = Policy::fixed_window(Rule::new(1, Duration::from_secs(1)).unwrap());
        for store in &stores {
            for _ in 0..2 {
                store
                    .check_at("warm-up", &warm_up, 1, 1_000_000)
                    .await
                    .unwrap();
            }
            store.idle().await;
        }
        Self {
            _servers: servers,
            _links: links,
            stores,
        }
    }

    fn stats(&self) -> Vec<RegionStats> {
        self.stores.iter().map(RegionalStore::stats).collect()
    }
}

/// The wall clock, the servers' clock (same machine), in µs.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Where the real key's traffic comes from.
#[derive(Debug, Clone, Copy)]
enum Spread {
    /// Round robin over the regions.
    Even,
    /// All from the first region.
    OneRegion,
}

/// One real check: its region, when it was sent and answered (µs), and
/// the decision.
struct Real {
    region: usize,
    sent: u64,
    answered: u64,
    decision: Result<Decision, Error>,
}

impl Real {
    /// The start (µs) of the window the decision was made in: the window
    /// ends `reset_after` after the decision, which was made between the
    /// request's sending and its answer, and ends at a whole second.
    /// `None` when more than one could be (an answer a window late).
    fn window(&self, decision: &Decision) -> Option<u64> {
        let reset = decision.reset_after().as_micros() as u64;
        let (earliest, latest) = (self.sent + reset, self.answered + reset);
        let end = latest / WINDOW_US * WINDOW_US;
        // 1 ms for the clocks' reading.
        (end + 1_000 >= earliest && latest - earliest < WINDOW_US).then(|| end - WINDOW_US)
    }
}

/// What a run saw.
#[derive(Debug, Default)]
struct Run {
    /// Admissions per measured window (0..WINDOWS), per region.
    admitted: BTreeMap<u64, [u64; REGIONS]>,
    /// Real requests sent per measured window (by the second they were sent in).
    sent: BTreeMap<u64, u64>,
    /// Real checks that failed.
    real_errors: u64,
    /// Real admissions whose window is unknown (answered a window late).
    unattributed: u64,
    /// The slowest real check.
    slowest: Duration,
    junk_sent: u64,
    junk_skipped: u64,
    junk_errors: Arc<AtomicU64>,
    /// How late the latest tick was sent.
    latest_tick: Duration,
    /// Per region, from the first measured window's start to the last's end.
    stats_before: Vec<RegionStats>,
    stats_after: Vec<RegionStats>,
    /// Per region: how long its syncs took to end after the traffic
    /// stopped (`None`: still running after the time allowed).
    drained_after: Vec<Option<Duration>>,
}

impl Run {
    fn admitted(&self, window: u64) -> u64 {
        self.admitted.get(&window).map_or(0, |a| a.iter().sum())
    }

    fn print(&self, what: &str) {
        eprintln!(
            "{what}: step {}, bound {} per window; latest tick {:?} late, slowest check {:?}, \
             {} admissions of unknown window",
            step(),
            bound(),
            self.latest_tick,
            self.slowest,
            self.unattributed
        );
        for window in 0..WINDOWS {
            eprintln!(
                "  window {window}: sent {}, admitted {} {:?}",
                self.sent.get(&window).copied().unwrap_or(0),
                self.admitted(window),
                self.admitted.get(&window).copied().unwrap_or_default()
            );
        }
        let seconds = (WINDOWS + JUNK_LEAD) as f64;
        if self.junk_sent + self.junk_skipped > 0 {
            eprintln!(
                "  junk: {} sent ({:.0}/s per region), {} skipped (in flight), {} failed",
                self.junk_sent,
                self.junk_sent as f64 / seconds / REGIONS as f64,
                self.junk_skipped,
                self.junk_errors.load(Ordering::Relaxed)
            );
        }
        let regions = NAMES
            .iter()
            .zip(&self.stats_before)
            .zip(&self.stats_after)
            .zip(&self.drained_after);
        for (((name, b), a), drained) in regions {
            eprintln!(
                "  {}: over the measured windows {} checks, {} tier crossings, {} syncs run, \
                 {} dropped, {} remote errors; syncs ended {:?} after the traffic",
                name,
                a.checks - b.checks,
                a.tier_crossings - b.tier_crossings,
                a.syncs - b.syncs,
                a.syncs_dropped - b.syncs_dropped,
                a.remote_errors - b.remote_errors,
                drained
            );
            if self.junk_sent > 0 {
                // Junk keys cross once each: before the fix, the backlog.
                eprintln!(
                    "    crossings not synced (waiting, or skipped uncounted) when the traffic \
                     stopped: {}",
                    a.tier_crossings.saturating_sub(a.syncs + a.syncs_dropped)
                );
            }
        }
    }
}

/// Sends the real key's traffic for `WINDOWS` whole windows (and junk from
/// `JUNK_LEAD` windows before, when `junk`), then waits for its answers and
/// for every region's syncs to end (for up to `drain`).
async fn run(world: &World, key: &str, spread: Spread, junk: bool, drain: Duration) -> Run {
    let mut run = Run::default();
    let lead = if junk { JUNK_LEAD } else { 1 };
    // The instant the first measured window starts: a whole second.
    let (wall, clock) = (now_us(), Instant::now());
    let first_window = (wall / WINDOW_US + 1 + lead) * WINDOW_US;
    let at = |wall_us: u64| clock + Duration::from_micros(wall_us - wall);
    let junk_start = first_window - lead * WINDOW_US;
    let end = first_window + WINDOWS * WINDOW_US;

    let policy = policy();
    let in_flight = Arc::new(Semaphore::new(JUNK_IN_FLIGHT));
    let mut junk_checks = JoinSet::new();
    let mut real_checks = JoinSet::new();
    let offset = TICK.as_micros() as u64 / 2;
    let mut tick_at = junk_start + offset;
    let mut tick = 0u64;
    let mut measuring = false;
    while tick_at < end {
        tokio::time::sleep_until(at(tick_at).into()).await;
        run.latest_tick = run
            .latest_tick
            .max(Duration::from_micros(now_us().saturating_sub(tick_at)));
        if !measuring && tick_at >= first_window {
            run.stats_before = world.stats();
            measuring = true;
        }
        if junk {
            for (region, store) in world.stores.iter().enumerate() {
                for k in 0..JUNK_KEYS {
                    let junk_key: Arc<str> = format!("junk:{region}:{tick}:{k}").into();
                    for _ in 0..JUNK_REQUESTS {
                        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
                            run.junk_skipped += 1;
                            continue;
                        };
                        run.junk_sent += 1;
                        let (store, key, policy) =
                            (store.clone(), Arc::clone(&junk_key), policy.clone());
                        let errors = Arc::clone(&run.junk_errors);
                        junk_checks.spawn(async move {
                            if store.check(&key, &policy, JUNK_COST).await.is_err() {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                            drop(permit);
                        });
                    }
                }
            }
            // Reap what ended, so the set stays small.
            while junk_checks.try_join_next().is_some() {}
        }
        if measuring {
            let region = match spread {
                Spread::Even => (tick as usize) % REGIONS,
                Spread::OneRegion => 0,
            };
            let (store, key, policy) =
                (world.stores[region].clone(), key.to_owned(), policy.clone());
            let sent = now_us();
            *run.sent
                .entry((sent - first_window) / WINDOW_US)
                .or_default() += 1;
            real_checks.spawn(async move {
                let decision = store.check(&key, &policy, 1).await;
                Real {
                    region,
                    sent,
                    answered: now_us(),
                    decision,
                }
            });
        }
        tick += 1;
        tick_at += TICK.as_micros() as u64;
    }
    run.stats_after = world.stats();
    while let Some(real) = real_checks.join_next().await {
        let real = real.unwrap();
        run.slowest = run
            .slowest
            .max(Duration::from_micros(real.answered - real.sent));
        match &real.decision {
            Ok(decision) if decision.allowed() => match real.window(decision) {
                Some(start) => {
                    let window = start
                        .checked_sub(first_window)
                        .expect("decided in a window before the first request was sent")
                        / WINDOW_US;
                    run.admitted.entry(window).or_default()[real.region] += 1;
                }
                None => run.unattributed += 1,
            },
            Ok(_) => {}
            Err(_) => run.real_errors += 1,
        }
    }
    while junk_checks.join_next().await.is_some() {}
    let stopped = Instant::now();
    let drains: Vec<_> = world
        .stores
        .iter()
        .map(|store| {
            let store = store.clone();
            tokio::spawn(async move {
                tokio::time::timeout(drain, store.idle())
                    .await
                    .ok()
                    .map(|()| stopped.elapsed())
            })
        })
        .collect();
    for drained in drains {
        run.drained_after.push(drained.await.unwrap());
    }
    run
}

fn assert_within_bound(run: &Run, what: &str) {
    assert_eq!(run.real_errors, 0, "{what}: real checks failed");
    assert_eq!(
        run.unattributed, 0,
        "{what}: admissions answered too late to tell their window (the slowest check took \
         {:?}): the machine is too loaded",
        run.slowest
    );
    assert_eq!(
        run.sent.values().sum::<u64>(),
        WINDOWS * TICKS_PER_WINDOW,
        "{what}: one real request a tick"
    );
    let admitted: Vec<u64> = (0..WINDOWS).map(|w| run.admitted(w)).collect();
    assert!(
        admitted.iter().all(|&a| a <= bound()),
        "{what}: per window at most quota + regions × step = {QUOTA} + {REGIONS} × {} = {} \
         admitted, got {admitted:?}",
        step(),
        bound()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_traffic_stays_within_the_bound_behind_slow_links() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start().await;
    let run = run(
        &world,
        "spread",
        Spread::Even,
        false,
        Duration::from_secs(2),
    )
    .await;
    run.print("spread evenly, no junk");
    assert_within_bound(&run, "spread evenly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_traffic_stays_within_the_bound_behind_a_backlog_of_junk_syncs() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start().await;
    let run = run(
        &world,
        "spread-behind-junk",
        Spread::Even,
        true,
        Duration::from_secs(3),
    )
    .await;
    run.print("spread evenly, behind junk");
    // The load this is about: every region's junk crossed more first tiers
    // than its syncs clear (32 at once, a round trip or two of 80 ms each:
    // 400 a second at the very most).
    for ((name, before), after) in NAMES.iter().zip(&run.stats_before).zip(&run.stats_after) {
        let crossings = after.tier_crossings - before.tier_crossings;
        assert!(
            crossings >= 400 * WINDOWS,
            "{name}: only {crossings} tier crossings in {WINDOWS} s: the machine could not send \
             the junk"
        );
    }
    assert_within_bound(&run, "spread evenly behind junk");
    // A sync of a window that is over is dropped, not run: once the traffic
    // stops, what is left ends within a window and a round trip or two.
    for (name, drained) in NAMES.iter().zip(&run.drained_after) {
        assert!(
            drained.is_some_and(|d| d <= Duration::from_secs(2)),
            "{name}: syncs still ran {drained:?} after the traffic stopped"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_from_one_region_still_gets_nearly_the_whole_quota() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start().await;
    let run = run(
        &world,
        "one-region",
        Spread::OneRegion,
        false,
        Duration::from_secs(2),
    )
    .await;
    run.print("from one region, no junk");
    assert_within_bound(&run, "from one region");
    let admitted: Vec<u64> = (0..WINDOWS).map(|w| run.admitted(w)).collect();
    // 90% of the quota, rounded up.
    let floor = (QUOTA * 9).div_ceil(10);
    assert!(
        admitted.iter().all(|&a| a >= floor),
        "from one region: every window admits at least {floor} of {QUOTA}, got {admitted:?}"
    );
}

/// The flip side of the hold: behind a backlog, one region's traffic waits
/// for syncs that come late, so it stays within the bound but may get far
/// less than the quota (docs/regions.md says so). Only the bound is asserted;
/// the figure is printed for BENCHMARKS.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_from_one_region_behind_a_backlog_stays_within_the_bound() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let world = World::start().await;
    let run = run(
        &world,
        "one-region-behind-junk",
        Spread::OneRegion,
        true,
        Duration::from_secs(3),
    )
    .await;
    run.print("from one region, behind junk");
    assert_within_bound(&run, "from one region behind junk");
}
