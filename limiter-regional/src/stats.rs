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
    /// Checks that asked for a sync: a tier crossed, a sliding window
    /// started here, or the quota found full before it was announced.
    pub tier_crossings: u64,
    /// Syncs run (crossings of one key and window while its sync runs are
    /// served by one more run).
    pub syncs: u64,
    /// Syncs not run because too many keys waited for one.
    pub syncs_dropped: u64,
    /// Syncs not run because their window had ended when their turn came.
    pub syncs_expired: u64,
    /// Checks denied because this region was held to its share of what
    /// remained while its sync had not completed.
    pub held: u64,
    /// Reads of another region's counts.
    pub cross_region_reads: u64,
    /// Writes into another region (tightened tiers, an exhausted quota,
    /// blocks, unblocks and denials counted by penalties).
    pub cross_region_writes: u64,
    /// Calls to another region that failed, timed out, or were skipped
    /// while its breaker was open.
    pub remote_errors: u64,
    /// Syncs that found the quota exhausted and announced it.
    pub exhausted_announced: u64,
    /// Announcements of another region noticed by a check here (one per
    /// key and window in this region).
    pub exhausted_received: u64,
    /// Denials and penalty blocks relayed to the other regions (a call to
    /// each at once), counted once every call has answered or failed.
    pub relays: u64,
    /// Denials and penalty blocks not relayed to the other regions because
    /// [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT) were under way.
    pub relays_dropped: u64,
}

impl RegionStats {
    /// Reads and writes to other regions.
    pub fn cross_region_calls(&self) -> u64 {
        self.cross_region_reads + self.cross_region_writes
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) checks: AtomicU64,
    pub(crate) tier_crossings: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) syncs_dropped: AtomicU64,
    pub(crate) syncs_expired: AtomicU64,
    pub(crate) held: AtomicU64,
    pub(crate) cross_region_reads: AtomicU64,
    pub(crate) cross_region_writes: AtomicU64,
    pub(crate) remote_errors: AtomicU64,
    pub(crate) exhausted_announced: AtomicU64,
    pub(crate) exhausted_received: AtomicU64,
    pub(crate) relays: AtomicU64,
    pub(crate) relays_dropped: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RegionStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RegionStats {
            checks: read(&self.checks),
            tier_crossings: read(&self.tier_crossings),
            syncs: read(&self.syncs),
            syncs_dropped: read(&self.syncs_dropped),
            syncs_expired: read(&self.syncs_expired),
            held: read(&self.held),
            cross_region_reads: read(&self.cross_region_reads),
            cross_region_writes: read(&self.cross_region_writes),
            remote_errors: read(&self.remote_errors),
            exhausted_announced: read(&self.exhausted_announced),
            exhausted_received: read(&self.exhausted_received),
            relays: read(&self.relays),
            relays_dropped: read(&self.relays_dropped),
        }
    }
}
