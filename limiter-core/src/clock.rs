//! Where the memory store's time comes from.
//!
//! The algorithms never read a clock; the memory store asks its [`Clock`].
//! Tests use a [`ManualClock`] and move time by hand instead of sleeping.
//! (The Redis store reads the Redis server's clock inside its scripts, so
//! application clocks never matter there.)

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

/// A source of the current time, in microseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;

    /// Waits until this clock shows `micros` or later: what a request that
    /// waits for its retry time sleeps on. The default sleeps on Tokio's
    /// timer for the difference from now.
    fn sleep_until(&self, micros: u64) -> impl Future<Output = ()> + Send {
        let wait = micros.saturating_sub(self.now_micros());
        tokio::time::sleep(Duration::from_micros(wait))
    }
}

/// The system clock: the default.
///
/// It reads a monotonic clock through `quanta` (the CPU's counter where the
/// CPU offers a stable one, cheaper than asking the kernel; the kernel's
/// monotonic clock otherwise), anchored to the wall clock the first time it
/// is read; it never steps back. Only differences of
/// its readings matter to the memory store, so it need not follow later
/// wall-clock corrections.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// The counter, and its raw reading and the wall-clock time (µs) taken
/// together once.
struct Anchor {
    counter: quanta::Clock,
    raw: u64,
    wall_us: u64,
}

static ANCHOR: LazyLock<Anchor> = LazyLock::new(|| {
    // The counter calibrates when it is made: before the pair is taken.
    let counter = quanta::Clock::new();
    // A clock set before 1970 is a broken host; treat it as the epoch.
    let wall_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    Anchor {
        raw: counter.raw(),
        counter,
        wall_us,
    }
});

impl Clock for SystemClock {
    #[inline]
    fn now_micros(&self) -> u64 {
        let anchor = &*ANCHOR;
        // Raw readings scaled once, as nanoseconds: no `Duration` on the
        // way (a reading before the anchor counts as the anchor).
        let elapsed_ns = anchor
            .counter
            .delta_as_nanos(anchor.raw, anchor.counter.raw());
        anchor.wall_us + elapsed_ns / 1_000
    }
}

/// A clock that moves only when told to. Clones share the same time, and
/// whatever sleeps on it ([`Clock::sleep_until`]) wakes when it is moved
/// past the instant it waits for.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Clock, ManualClock};
///
/// let clock = ManualClock::new(Duration::from_secs(1_000));
/// let seen_by_store = clock.clone();
/// clock.advance(Duration::from_millis(1_500));
/// assert_eq!(seen_by_store.now_micros(), 1_001_500_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    micros: Arc<AtomicU64>,
    moved: Arc<Notify>,
}

impl ManualClock {
    /// A clock showing `since_epoch`.
    pub fn new(since_epoch: Duration) -> Self {
        Self {
            micros: Arc::new(AtomicU64::new(since_epoch.as_micros() as u64)),
            moved: Arc::default(),
        }
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.micros
            .fetch_add(by.as_micros() as u64, Ordering::SeqCst);
        self.moved.notify_waiters();
    }

    /// Sets the time to `since_epoch` (which may be earlier than now).
    pub fn set(&self, since_epoch: Duration) {
        self.micros
            .store(since_epoch.as_micros() as u64, Ordering::SeqCst);
        self.moved.notify_waiters();
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(Ordering::SeqCst)
    }

    /// Wakes when the clock is moved to `micros` or later; sleeps forever
    /// while nobody moves it.
    fn sleep_until(&self, micros: u64) -> impl Future<Output = ()> + Send {
        let clock = self.clone();
        async move {
            loop {
                let moved = clock.moved.notified();
                let mut moved = std::pin::pin!(moved);
                // Registered before the time is read: a move in between wakes it.
                moved.as_mut().enable();
                if clock.now_micros() >= micros {
                    return;
                }
                moved.await;
            }
        }
    }
}

impl<C: Clock> Clock for Arc<C> {
    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }

    fn sleep_until(&self, micros: u64) -> impl Future<Output = ()> + Send {
        (**self).sleep_until(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_between_two_wall_clock_readings() {
        let wall = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_micros() as u64
        };
        SystemClock.now_micros();
        let before = wall();
        let ours = SystemClock.now_micros();
        let after = wall();
        // The anchor's two readings are a few µs apart: allow that much.
        const ANCHOR_SKEW: u64 = 100;
        assert!(
            before <= ours + ANCHOR_SKEW && ours <= after + ANCHOR_SKEW,
            "{before} {ours} {after}"
        );
        assert!(SystemClock.now_micros() >= ours, "never steps back");
    }
}
