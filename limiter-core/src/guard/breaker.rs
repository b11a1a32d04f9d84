//! The circuit breaker: after consecutive failures, stop paying the store's
//! deadline on every request; let one probe through per interval to find out
//! when the store is back.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Call the store.
    Store,
    /// Call the store as the probe: its outcome closes or reopens the breaker.
    Probe,
    /// Do not call the store: apply the failure policy.
    Skip,
}

pub(crate) struct Breaker<C> {
    config: BreakerConfig,
    clock: C,
    failures: AtomicU32,
    /// When the breaker may let the next probe through (µs); 0 when closed.
    open_until: AtomicU64,
    probing: AtomicBool,
}

impl<C: Clock> Breaker<C> {
    pub(crate) fn new(config: BreakerConfig, clock: C) -> Self {
        Self {
            config,
            clock,
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    pub(crate) fn admit(&self) -> Admission {
        let open_until = self.open_until.load(Ordering::Acquire);
        if open_until == 0 {
            return Admission::Store;
        }
        if self.clock.now_micros() < open_until {
            return Admission::Skip;
        }
        // One caller wins the probe; the others keep using the policy.
        match self
            .probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Admission::Probe,
            Err(_) => Admission::Skip,
        }
    }

    pub(crate) fn succeeded(&self, admission: Admission) {
        self.failures.store(0, Ordering::Release);
        if admission == Admission::Probe {
            self.open_until.store(0, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            tracing::warn!("rate-limit store is back: circuit breaker closed");
        }
    }

    pub(crate) fn failed(&self, admission: Admission) {
        let reopen = self.clock.now_micros() + self.config.probe_interval.as_micros() as u64;
        if admission == Admission::Probe {
            self.open_until.store(reopen, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            tracing::warn!("rate-limit store still failing: circuit breaker stays open");
            return;
        }
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if failures >= self.config.failures_to_open
            && self
                .open_until
                .compare_exchange(0, reopen, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            tracing::warn!(
                failures,
                probe_interval = ?self.config.probe_interval,
                "rate-limit store failing: circuit breaker opened"
            );
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        if self.open_until.load(Ordering::Acquire) == 0 {
            BreakerState::Closed
        } else if self.probing.load(Ordering::Acquire) {
            BreakerState::HalfOpen
        } else {
            BreakerState::Open
        }
    }

    /// Time until the next probe may go (zero when closed).
    pub(crate) fn until_probe(&self) -> Duration {
        let open_until = self.open_until.load(Ordering::Acquire);
        Duration::from_micros(open_until.saturating_sub(self.clock.now_micros()))
    }
}

impl<C> fmt::Debug for Breaker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("config", &self.config)
            .field("failures", &self.failures.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    #[test]
    fn opens_after_consecutive_failures_and_probes_once_per_interval() {
        let clock = ManualClock::new(Duration::from_secs(100));
        let breaker = Breaker::new(BreakerConfig::default(), clock.clone());
        breaker.failed(Admission::Store);
        breaker.succeeded(Admission::Store);
        breaker.failed(Admission::Store);
        breaker.failed(Admission::Store);
        assert_eq!(
            breaker.admit(),
            Admission::Store,
            "a success resets the count"
        );
        breaker.failed(Admission::Store);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.admit(), Admission::Skip);
        assert_eq!(breaker.until_probe(), Duration::from_secs(1));

        clock.advance(Duration::from_secs(1));
        assert_eq!(breaker.admit(), Admission::Probe);
        assert_eq!(breaker.admit(), Admission::Skip, "one probe at a time");
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        breaker.failed(Admission::Probe);
        assert_eq!(breaker.admit(), Admission::Skip);

        clock.advance(Duration::from_secs(1));
        assert_eq!(breaker.admit(), Admission::Probe);
        breaker.succeeded(Admission::Probe);
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert_eq!(breaker.admit(), Admission::Store);
    }
}
