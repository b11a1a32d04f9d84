//! The circuit breaker: after consecutive failures, stop paying the store's
//! deadline on every request; let one probe through per interval to find out
//! when the store is back.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Clock;

/// When the breaker opens and how often it probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker (default 3).
    pub failures_to_open: u32,
    /// How long it stays open before letting one probe through; also the
    /// interval between probes while the store stays down (default 1 s).
    pub probe_interval: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failures_to_open: 3,
            probe_interval: Duration::from_secs(1),
        }
    }
}

/// The breaker's state, as the `limiter_breaker_state` gauge reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go to the store (gauge 0).
    Closed,
    /// Calls go to the failure policy (gauge 1).
    Open,
    /// One probe is on its way to the store (gauge 2).
    HalfOpen,
}

/// What to do with one call.
#[derive(Debug)]
pub(crate) enum Admission<'a> {
    /// Call the store.
    Store,
    /// Call the store as the probe: its outcome closes or reopens the breaker.
    /// Dropped without an outcome (the caller's future was cancelled), it
    /// gives the probe back, so the next call can probe.
    Probe(ProbeLease<'a>),
    /// Do not call the store: apply the failure policy.
    Skip,
}

/// The right to probe the store, held by one call at a time.
#[derive(Debug)]
pub(crate) struct ProbeLease<'a> {
    probing: &'a AtomicU64,
    started: u64,
    node: Option<&'a str>,
}

impl ProbeLease<'_> {
    /// Clears this probe's mark; whether it was still this probe's (an
    /// expired lease may have been taken over by another probe).
    fn release(&self) -> bool {
        self.probing
            .compare_exchange(self.started, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The probe has an outcome, which the caller records.
    fn end(self) {
        self.release();
        std::mem::forget(self);
    }
}

impl Drop for ProbeLease<'_> {
    fn drop(&mut self) {
        if self.release() {
            // Given back without an outcome: the breaker is open again.
            report(BreakerState::Open, self.node);
        }
    }
}

pub(crate) struct Breaker<C> {
    config: BreakerConfig,
    clock: C,
    failures: AtomicU32,
    /// When the breaker may let the next probe through (µs); 0 when closed.
    open_until: AtomicU64,
    /// When the probe in flight started (µs); 0 when none is.
    probing: AtomicU64,
    /// How long a probe may stay in flight before another may go: the
    /// lease guards against a probe whose future is never polled again nor
    /// dropped (a drop gives the probe back at once).
    probe_lease_us: u64,
    /// The node it guards, when the store fails node by node (the `node`
    /// label of the gauge).
    node: Option<Box<str>>,
}

impl<C: Clock> Breaker<C> {
    /// A closed breaker for the whole store, or for one `node` of it; a
    /// probe that has not ended after `probe_lease` no longer stops another.
    pub(crate) fn new(
        config: BreakerConfig,
        probe_lease: Duration,
        clock: C,
        node: Option<String>,
    ) -> Self {
        let breaker = Self {
            config,
            clock,
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicU64::new(0),
            probe_lease_us: probe_lease.as_micros().max(1) as u64,
            node: node.map(String::into_boxed_str),
        };
        breaker.report(BreakerState::Closed);
        breaker
    }

    fn report(&self, state: BreakerState) {
        report(state, self.node.as_deref());
    }

    pub(crate) fn admit(&self) -> Admission<'_> {
        let open_until = self.open_until.load(Ordering::Acquire);
        if open_until == 0 {
            return Admission::Store;
        }
        let now = self.clock.now_micros().max(1);
        if now < open_until {
            return Admission::Skip;
        }
        // One caller wins the probe; the others keep using the policy.
        let probing = self.probing.load(Ordering::Acquire);
        if probing != 0 && now < probing.saturating_add(self.probe_lease_us) {
            return Admission::Skip;
        }
        match self
            .probing
            .compare_exchange(probing, now, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                self.report(BreakerState::HalfOpen);
                Admission::Probe(ProbeLease {
                    probing: &self.probing,
                    started: now,
                    node: self.node.as_deref(),
                })
            }
            Err(_) => Admission::Skip,
        }
    }

    pub(crate) fn succeeded(&self, admission: Admission<'_>) {
        self.failures.store(0, Ordering::Release);
        if let Admission::Probe(lease) = admission {
            self.open_until.store(0, Ordering::Release);
            lease.end();
            self.report(BreakerState::Closed);
            tracing::warn!(
                node = self.node.as_deref(),
                "rate-limit store is back: circuit breaker closed"
            );
        }
    }

    pub(crate) fn failed(&self, admission: Admission<'_>) {
        let reopen = self.clock.now_micros() + self.config.probe_interval.as_micros() as u64;
        if let Admission::Probe(lease) = admission {
            self.open_until.store(reopen, Ordering::Release);
            lease.end();
            self.report(BreakerState::Open);
            tracing::warn!(
                node = self.node.as_deref(),
                "rate-limit store still failing: circuit breaker stays open"
            );
            return;
        }
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if failures >= self.config.failures_to_open
            && self
                .open_until
                .compare_exchange(0, reopen, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.report(BreakerState::Open);
            tracing::warn!(
                node = self.node.as_deref(),
                failures,
                probe_interval = ?self.config.probe_interval,
                "rate-limit store failing: circuit breaker opened"
            );
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        if self.open_until.load(Ordering::Acquire) == 0 {
            BreakerState::Closed
        } else if self.probing.load(Ordering::Acquire) != 0 {
            BreakerState::HalfOpen
        } else {
            BreakerState::Open
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.open_until.load(Ordering::Acquire) == 0
    }

    /// Time until the next probe may go (zero when closed).
    pub(crate) fn until_probe(&self) -> Duration {
        let open_until = self.open_until.load(Ordering::Acquire);
        Duration::from_micros(open_until.saturating_sub(self.clock.now_micros()))
    }
}

/// Sets the `limiter_breaker_state` gauge (of `node`, when the breaker
/// guards one node).
fn report(state: BreakerState, node: Option<&str>) {
    match node {
        None => metrics::gauge!("limiter_breaker_state").set(state.gauge()),
        Some(node) => {
            metrics::gauge!("limiter_breaker_state", "node" => node.to_owned()).set(state.gauge())
        }
    }
}

impl BreakerState {
    /// The value of the `limiter_breaker_state` gauge.
    pub(crate) fn gauge(self) -> f64 {
        match self {
            Self::Closed => 0.0,
            Self::Open => 1.0,
            Self::HalfOpen => 2.0,
        }
    }
}

impl<C> fmt::Debug for Breaker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("node", &self.node)
            .field("config", &self.config)
            .field("failures", &self.failures.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn breaker(clock: &ManualClock) -> Breaker<ManualClock> {
        Breaker::new(
            BreakerConfig::default(),
            Duration::from_secs(5),
            clock.clone(),
            None,
        )
    }

    fn is_probe(admission: &Admission<'_>) -> bool {
        matches!(admission, Admission::Probe(_))
    }

    fn open(breaker: &Breaker<ManualClock>) {
        for _ in 0..3 {
            breaker.failed(Admission::Store);
        }
        assert_eq!(breaker.state(), BreakerState::Open);
    }

    #[test]
    fn opens_after_consecutive_failures_and_probes_once_per_interval() {
        let clock = ManualClock::new(Duration::from_secs(100));
        let breaker = breaker(&clock);
        breaker.failed(Admission::Store);
        breaker.succeeded(Admission::Store);
        breaker.failed(Admission::Store);
        breaker.failed(Admission::Store);
        assert!(
            matches!(breaker.admit(), Admission::Store),
            "a success resets the count"
        );
        breaker.failed(Admission::Store);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert!(matches!(breaker.admit(), Admission::Skip));
        assert_eq!(breaker.until_probe(), Duration::from_secs(1));

        clock.advance(Duration::from_secs(1));
        let probe = breaker.admit();
        assert!(is_probe(&probe));
        assert!(
            matches!(breaker.admit(), Admission::Skip),
            "one probe at a time"
        );
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        breaker.failed(probe);
        assert!(matches!(breaker.admit(), Admission::Skip));

        clock.advance(Duration::from_secs(1));
        let probe = breaker.admit();
        assert!(is_probe(&probe));
        breaker.succeeded(probe);
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert!(matches!(breaker.admit(), Admission::Store));
    }

    #[test]
    fn a_probe_dropped_without_an_outcome_lets_the_next_call_probe() {
        let clock = ManualClock::new(Duration::from_secs(100));
        let breaker = breaker(&clock);
        open(&breaker);
        clock.advance(Duration::from_secs(1));
        let probe = breaker.admit();
        assert!(is_probe(&probe));
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        // The probing request's future is dropped (client gone, a timeout layer).
        drop(probe);
        assert_eq!(breaker.state(), BreakerState::Open);
        let probe = breaker.admit();
        assert!(is_probe(&probe), "not stuck: the next call probes at once");
        breaker.succeeded(probe);
        assert_eq!(breaker.state(), BreakerState::Closed);
    }

    #[test]
    fn a_probe_that_is_never_finished_expires_after_its_lease() {
        let clock = ManualClock::new(Duration::from_secs(100));
        let breaker = breaker(&clock);
        open(&breaker);
        clock.advance(Duration::from_secs(1));
        let forgotten = breaker.admit();
        assert!(is_probe(&forgotten));
        clock.advance(Duration::from_micros(4_999_999));
        assert!(matches!(breaker.admit(), Admission::Skip));
        clock.advance(Duration::from_micros(1));
        let second = breaker.admit();
        assert!(is_probe(&second), "the lease ended: another call probes");
        // The forgotten probe ends late: it does not clear the second one's mark.
        drop(forgotten);
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        assert!(matches!(breaker.admit(), Admission::Skip));
        breaker.succeeded(second);
        assert_eq!(breaker.state(), BreakerState::Closed);
    }
}
