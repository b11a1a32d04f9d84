//! Real traffic on one key across the regions of a [`World`], in real
//! time: one request every 10 ms (100 a second), each tick's request sent
//! to the region a plan names, beside optional junk and partitions. Each
//! admission is counted in the window its decision was made in (from the
//! decision's `reset_after`: the window ends at a whole second, between
//! the request's sending plus `reset_after` and its answer plus
//! `reset_after`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use limiter_core::{Decision, Error, Key, Store};
use limiter_regional::RegionStats;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::regional_world::{NAMES, QUOTA, REGIONS, WINDOW_US, World, now_us, policy};

/// One real request per tick: 100 a second.
pub(crate) const TICK: Duration = Duration::from_millis(10);
pub(crate) const TICKS_PER_WINDOW: u64 = WINDOW_US / TICK.as_micros() as u64;
/// Junk per region and tick: fresh keys, each sent one request of
/// `JUNK_COST` (the quota divided by the regions: a region's whole share
/// at once). 500 keys a second per region: as much as a 2-core machine
/// sends beside three Redis servers and six proxies (at 3,000 requests a
/// second per region it sent 1,236 and answered checks up to 2.5 s late).
const JUNK_KEYS: u64 = 5;
pub(crate) const JUNK_COST: u64 = QUOTA / REGIONS as u64;
/// Junk runs this long before the first measured window, so its backlog
/// is already there.
pub(crate) const JUNK_LEAD: u64 = 2;
/// Junk requests in flight at most; past it a junk request is not sent.
const JUNK_IN_FLIGHT: usize = 4_096;

/// Something done to the network at a tick of the measured windows.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    Partition(usize),
    Heal,
}

/// What a run sends.
pub(crate) struct Plan {
    pub(crate) key: &'static str,
    /// Whole windows measured, each with real traffic.
    pub(crate) windows: u64,
    /// The region of each tick's real request (ticks count from the first
    /// measured window's start).
    pub(crate) route: fn(u64) -> usize,
    /// 500 junk keys a second per region, from two windows before.
    pub(crate) junk: bool,
    pub(crate) events: Vec<(u64, Event)>,
    /// How long to wait for the regions' background work after the traffic.
    pub(crate) drain: Duration,
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
pub(crate) struct Run {
    pub(crate) windows: u64,
    /// Admissions per measured window, per region.
    pub(crate) admitted: BTreeMap<u64, [u64; REGIONS]>,
    /// Real requests sent per measured window (by the second they were sent in).
    pub(crate) sent: BTreeMap<u64, u64>,
    pub(crate) real_errors: u64,
    /// Real admissions whose window is unknown (answered a window late).
    pub(crate) unattributed: u64,
    /// Every real check's time, sending to answer.
    pub(crate) latencies: Vec<Duration>,
    pub(crate) junk_sent: u64,
    pub(crate) junk_skipped: u64,
    pub(crate) junk_errors: Arc<AtomicU64>,
    /// How late the latest tick was sent.
    pub(crate) latest_tick: Duration,
    /// Per region, at the first measured window's start and once every real
    /// check is answered.
    pub(crate) stats_before: Vec<RegionStats>,
    pub(crate) stats_after: Vec<RegionStats>,
    /// Per region: how long its background work took to end after the
    /// traffic stopped (`None`: still running after the time allowed).
    pub(crate) drained_after: Vec<Option<Duration>>,
}

impl Run {
    pub(crate) fn admitted(&self, window: u64) -> u64 {
        self.admitted.get(&window).map_or(0, |a| a.iter().sum())
    }

    /// Admissions of every measured window.
    pub(crate) fn per_window(&self) -> Vec<u64> {
        (0..self.windows).map(|w| self.admitted(w)).collect()
    }

    /// The 99th percentile of the real checks' times.
    pub(crate) fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted
            .get((sorted.len() * 99).div_ceil(100).max(1) - 1)
            .copied()
            .unwrap_or_default()
    }

    pub(crate) fn print(&self, what: &str) {
        let slowest = self.latencies.iter().max().copied().unwrap_or_default();
        eprintln!(
            "{what}: per window {:?}; real checks p99 {:?}, slowest {:?}; latest tick {:?} \
             late; {} admissions of unknown window",
            self.per_window(),
            self.p99(),
            slowest,
            self.latest_tick,
            self.unattributed
        );
        for window in 0..self.windows {
            eprintln!(
                "  window {window}: sent {}, admitted {} {:?}",
                self.sent.get(&window).copied().unwrap_or(0),
                self.admitted(window),
                self.admitted.get(&window).copied().unwrap_or_default()
            );
        }
        if self.junk_sent + self.junk_skipped > 0 {
            let seconds = (self.windows + JUNK_LEAD) as f64;
            eprintln!(
                "  junk: {} sent ({:.0}/s per region), {} skipped (in flight), {} failed",
                self.junk_sent,
                self.junk_sent as f64 / seconds / REGIONS as f64,
                self.junk_skipped,
                self.junk_errors.load(Ordering::Relaxed)
            );
        }
        let regions = NAMES.iter().zip(&self.stats_before).zip(&self.stats_after);
        for (((name, before), after), drained) in regions.zip(&self.drained_after) {
            eprintln!(
                "  {name}: {} checks over the measured windows; background work ended \
                 {drained:?} after the traffic",
                after.checks - before.checks
            );
        }
    }

    /// Every real request sent, decided, and placed in its window.
    pub(crate) fn assert_clean(&self, what: &str) {
        assert_eq!(self.real_errors, 0, "{what}: real checks failed");
        assert_eq!(
            self.unattributed,
            0,
            "{what}: admissions answered too late to tell their window (the slowest check \
             took {:?}): the machine is too loaded",
            self.latencies.iter().max()
        );
        assert_eq!(
            self.sent.values().sum::<u64>(),
            self.windows * TICKS_PER_WINDOW,
            "{what}: one real request a tick"
        );
    }

    /// Never more than the quota in a window, across every region.
    pub(crate) fn assert_at_most_the_quota(&self, what: &str) {
        let admitted = self.per_window();
        assert!(
            admitted.iter().all(|&a| a <= QUOTA),
            "{what}: per window at most the quota, {QUOTA}, admitted; got {admitted:?}"
        );
    }

    /// At least `floor` admitted in every window from `from` on.
    pub(crate) fn assert_at_least(&self, what: &str, floor: u64, from: u64) {
        let admitted = self.per_window();
        assert!(
            admitted[from as usize..].iter().all(|&a| a >= floor),
            "{what}: at least {floor} of {QUOTA} admitted in every window from window {from} \
             on; got {admitted:?}"
        );
    }

    /// A decision waits for its own region's Redis only.
    pub(crate) fn assert_p99_below(&self, what: &str, limit: Duration) {
        assert!(
            self.p99() < limit,
            "{what}: real checks' p99 {:?}, not below {limit:?}: a decision waited on another \
             region",
            self.p99()
        );
    }
}

/// Spawns, per region, one check of `JUNK_COST` on each of `JUNK_KEYS`
/// fresh keys, unless `JUNK_IN_FLIGHT` are already in flight.
fn send_junk(
    world: &World,
    tick: u64,
    in_flight: &Arc<Semaphore>,
    checks: &mut JoinSet<()>,
    run: &mut Run,
) {
    let policy = policy();
    for (region, store) in world.stores.iter().enumerate() {
        for k in 0..JUNK_KEYS {
            let Ok(permit) = Arc::clone(in_flight).try_acquire_owned() else {
                run.junk_skipped += 1;
                continue;
            };
            run.junk_sent += 1;
            let (store, policy) = (store.clone(), policy.clone());
            let key = Key::from(format!("junk:{region}:{tick}:{k}"));
            let errors = Arc::clone(&run.junk_errors);
            checks.spawn(async move {
                if store.check(&key, &policy, JUNK_COST).await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
        }
    }
    // Reap what ended, so the set stays small.
    while checks.try_join_next().is_some() {}
}

/// Sends the plan's real traffic for its whole windows (and junk from
/// `JUNK_LEAD` windows before, when asked), then waits for its answers and
/// for every region's background work to end (for up to the plan's drain).
pub(crate) async fn run(world: &World, plan: &Plan) -> Run {
    let mut run = Run {
        windows: plan.windows,
        ..Run::default()
    };
    let lead = if plan.junk { JUNK_LEAD } else { 1 };
    // The instant the first measured window starts: a whole second.
    let (wall, clock) = (now_us(), Instant::now());
    let first_window = (wall / WINDOW_US + 1 + lead) * WINDOW_US;
    let at = |wall_us: u64| clock + Duration::from_micros(wall_us - wall);
    let end = first_window + plan.windows * WINDOW_US;

    let policy = policy();
    let in_flight = Arc::new(Semaphore::new(JUNK_IN_FLIGHT));
    let mut junk_checks = JoinSet::new();
    let mut real_checks = JoinSet::new();
    // Ticks in the middle of their 10 ms, so none is sent on a window's edge.
    let mut tick_at = first_window - lead * WINDOW_US + TICK.as_micros() as u64 / 2;
    let mut junk_tick = 0u64;
    while tick_at < end {
        tokio::time::sleep_until(at(tick_at).into()).await;
        run.latest_tick = run
            .latest_tick
            .max(Duration::from_micros(now_us().saturating_sub(tick_at)));
        if plan.junk {
            send_junk(world, junk_tick, &in_flight, &mut junk_checks, &mut run);
        }
        if tick_at >= first_window {
            let tick = (tick_at - first_window) / TICK.as_micros() as u64;
            if tick == 0 {
                run.stats_before = world.stats();
            }
            for &(_, event) in plan.events.iter().filter(|(at, _)| *at == tick) {
                match event {
                    Event::Partition(region) => world.network.partition(region),
                    Event::Heal => world.network.heal(),
                }
            }
            let region = (plan.route)(tick);
            let (store, policy) = (world.stores[region].clone(), policy.clone());
            let key = plan.key;
            let sent = now_us();
            *run.sent
                .entry((sent - first_window) / WINDOW_US)
                .or_default() += 1;
            real_checks.spawn(async move {
                let decision = store.check(&Key::from(key), &policy, 1).await;
                let answered = now_us();
                Real {
                    region,
                    sent,
                    answered,
                    decision,
                }
            });
        }
        junk_tick += 1;
        tick_at += TICK.as_micros() as u64;
    }
    while let Some(real) = real_checks.join_next().await {
        run.record(&real.unwrap(), first_window);
    }
    run.stats_after = world.stats();
    while junk_checks.join_next().await.is_some() {}
    run.drained_after = drain(world, plan.drain).await;
    run
}

impl Run {
    fn record(&mut self, real: &Real, first_window: u64) {
        self.latencies
            .push(Duration::from_micros(real.answered - real.sent));
        match &real.decision {
            Ok(decision) if decision.allowed() => match real.window(decision) {
                Some(start) => {
                    let window = start
                        .checked_sub(first_window)
                        .expect("decided in a window before the first request was sent")
                        / WINDOW_US;
                    self.admitted.entry(window).or_default()[real.region] += 1;
                }
                None => self.unattributed += 1,
            },
            Ok(_) => {}
            Err(_) => self.real_errors += 1,
        }
    }
}

/// Per region, how long after now its background work ended (`None`: not
/// within `drain`).
async fn drain(world: &World, drain: Duration) -> Vec<Option<Duration>> {
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
    let mut drained = Vec::new();
    for done in drains {
        drained.push(done.await.unwrap());
    }
    drained
}
