//! What every hot-key mode of one instance shares: its clock, its turn
//! among shards, its lease ids, and the bound on the keys it tracks.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::{Clock, ManualClock, SystemClock};

/// The most keys whose lease or sampling state an instance keeps: past it,
/// keys idle for a lease's length are dropped, and a new key goes to the
/// store directly (exact) while none is idle.
pub(crate) const MAX_TRACKED_KEYS: usize = 65_536;

/// How often a full table of keys may be swept for keys to forget: a flood
/// of distinct keys that keeps it full costs one sweep per interval, not a
/// sweep of every key per request.
const SWEEP_INTERVAL_US: u64 = 100_000;

/// When a full table of keys may next be swept.
#[derive(Debug, Default)]
pub(crate) struct SweepGate {
    next: std::sync::atomic::AtomicU64,
    #[cfg(test)]
    pub(crate) sweeps: std::sync::atomic::AtomicU64,
}

impl SweepGate {
    /// Whether a sweep may run at `now` (µs); if so, the next may run an
    /// interval later.
    pub(crate) fn due(&self, now: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let next = self.next.load(Relaxed);
        let due = now >= next
            && self
                .next
                .compare_exchange(next, now + SWEEP_INTERVAL_US, Relaxed, Relaxed)
                .is_ok();
        #[cfg(test)]
        if due {
            self.sweeps.fetch_add(1, Relaxed);
        }
        due
    }
}

/// One instance's clock, turn among shards and lease ids.
pub(crate) struct Instance {
    pub(crate) clock: HotClock,
    /// The store decides at this instance's clock (tests only).
    pub(crate) store_time: bool,
    pub(crate) turn: AtomicU64,
    /// Lease ids: unique per instance (random start), then counted up.
    next_id: AtomicU64,
}

/// The clock of the leases: the system's, or a test's.
#[derive(Clone)]
pub(crate) enum HotClock {
    System,
    Manual(ManualClock),
}

impl HotClock {
    pub(crate) fn now(&self) -> u64 {
        match self {
            Self::System => SystemClock.now_micros(),
            Self::Manual(clock) => clock.now_micros(),
        }
    }

    pub(crate) async fn sleep_until(&self, micros: u64) {
        match self {
            Self::System => SystemClock.sleep_until(micros).await,
            Self::Manual(clock) => clock.sleep_until(micros).await,
        }
    }
}

impl Instance {
    pub(crate) fn new(clock: HotClock, store_time: bool) -> Self {
        // A random start: instances must not share lease ids.
        let seed = foldhash::fast::RandomState::default().hash_one(SystemClock.now_micros());
        Self {
            clock,
            store_time,
            turn: AtomicU64::new(0),
            next_id: AtomicU64::new(seed >> 16),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}
