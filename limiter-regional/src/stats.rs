//! What a regional store has done: counters read by
//! [`RegionalStore::stats`](crate::RegionalStore::stats).

use std::sync::atomic::{AtomicU64, Ordering};

/// What a regional store has done since it was made: cumulative counts,
/// read with [`RegionalStore::stats`](crate::RegionalStore::stats). The
/// same events go to the `metrics` facade (see the metrics table in docs/operations.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionStats {
    /// Decisions answered by this region's Redis.
    pub checks: u64,
    /// Checks denied while this region's ask for the others' spare shares
    /// was out: the request may pass once it is answered.
    pub denied_while_asking: u64,
    /// Asks run: a key's check found its lease short of its demand, and
    /// every other region was asked for its spare share.
    pub asks: u64,
    /// Asks not run because too many keys waited to ask.
    pub asks_dropped: u64,
    /// Asks not run because their window had ended when their turn came.
    pub asks_expired: u64,
    /// Requests' worth of the window's quota the others gave this region's
    /// asks.
    pub received: u64,
    /// Calls to another region.
    pub cross_region_calls: u64,
    /// Calls to another region that failed, timed out, or were skipped
    /// while its breaker was open.
    pub remote_errors: u64,
    /// Denials and penalty blocks relayed to the other regions (a call to
    /// each at once), counted once every call has answered or failed.
    pub relays: u64,
    /// Denials and penalty blocks not relayed to the other regions because
    /// [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT) were under way.
    pub relays_dropped: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) checks: AtomicU64,
    pub(crate) denied_while_asking: AtomicU64,
    pub(crate) asks: AtomicU64,
    pub(crate) asks_dropped: AtomicU64,
    pub(crate) asks_expired: AtomicU64,
    pub(crate) received: AtomicU64,
    pub(crate) cross_region_calls: AtomicU64,
    pub(crate) remote_errors: AtomicU64,
    pub(crate) relays: AtomicU64,
    pub(crate) relays_dropped: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RegionStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RegionStats {
            checks: read(&self.checks),
            denied_while_asking: read(&self.denied_while_asking),
            asks: read(&self.asks),
            asks_dropped: read(&self.asks_dropped),
            asks_expired: read(&self.asks_expired),
            received: read(&self.received),
            cross_region_calls: read(&self.cross_region_calls),
            remote_errors: read(&self.remote_errors),
            relays: read(&self.relays),
            relays_dropped: read(&self.relays_dropped),
        }
    }
}
