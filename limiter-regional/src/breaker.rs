//! A breaker per other region: after consecutive failures, syncs stop
//! calling that region until a probe interval has passed; then one call at a
//! time tries it.
//!
//! Simpler than the guard's breaker, because nothing waits on these calls:
//! they run in background syncs, so there is no failure policy to apply and
//! no request to answer meanwhile. A call that never reports (its sync was
//! dropped) holds the probe for one interval at most.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use limiter_core::BreakerConfig;
use limiter_core::Clock;

#[derive(Debug)]
pub(crate) struct PeerBreaker<C> {
    config: BreakerConfig,
    clock: C,
    failures: AtomicU32,
    /// When the next call may go (µs); 0 while closed.
    open_until: AtomicU64,
}

impl<C: Clock> PeerBreaker<C> {
    pub(crate) fn new(config: BreakerConfig, clock: C) -> Self {
        Self {
            config,
            clock,
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
        }
    }

    /// Whether a call may go now. While open, the first caller after the
    /// interval wins the probe and pushes the next one an interval later.
    pub(crate) fn allow(&self) -> bool {
        let open_until = self.open_until.load(Ordering::Acquire);
        if open_until == 0 {
            return true;
        }
        let now = self.clock.now_micros();
        now >= open_until
            && self
                .open_until
                .compare_exchange(
                    open_until,
                    self.reopen_at(now),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
    }

    pub(crate) fn succeeded(&self) {
        self.failures.store(0, Ordering::Release);
        self.open_until.store(0, Ordering::Release);
    }

    pub(crate) fn failed(&self) {
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if failures >= self.config.failures_to_open {
            let reopen = self.reopen_at(self.clock.now_micros());
            self.open_until.fetch_max(reopen, Ordering::AcqRel);
        }
    }

    #[cfg(test)]
    fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != 0
    }

    fn reopen_at(&self, now: u64) -> u64 {
        (now + self.config.probe_interval.as_micros() as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use limiter_core::ManualClock;

    #[test]
    fn opens_after_consecutive_failures_and_probes_once_per_interval() {
        let clock = ManualClock::new(Duration::from_secs(100));
        let breaker = PeerBreaker::new(BreakerConfig::default(), clock.clone());
        breaker.failed();
        breaker.failed();
        breaker.succeeded();
        breaker.failed();
        breaker.failed();
        assert!(breaker.allow(), "a success resets the count");
        breaker.failed();
        assert!(breaker.is_open());
        assert!(!breaker.allow());
        clock.advance(Duration::from_millis(999));
        assert!(!breaker.allow());
        clock.advance(Duration::from_millis(1));
        assert!(breaker.allow(), "one probe after the interval");
        assert!(!breaker.allow(), "only one");
        breaker.failed();
        clock.advance(Duration::from_secs(1));
        assert!(breaker.allow());
        breaker.succeeded();
        assert!(!breaker.is_open());
        assert!(breaker.allow() && breaker.allow());
    }

    #[test]
    fn a_probe_that_never_reports_holds_the_breaker_one_interval() {
        let clock = ManualClock::new(Duration::from_secs(100));
        let breaker = PeerBreaker::new(BreakerConfig::default(), clock.clone());
        for _ in 0..3 {
            breaker.failed();
        }
        clock.advance(Duration::from_secs(1));
        assert!(breaker.allow(), "the probe, whose sync is then dropped");
        clock.advance(Duration::from_millis(999));
        assert!(!breaker.allow());
        clock.advance(Duration::from_millis(1));
        assert!(breaker.allow(), "not stuck: the next call probes");
    }
}
