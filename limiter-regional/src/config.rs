//! How a regional store counts: its tiers, deadlines and bounds.

use std::time::Duration;

use limiter_core::{BreakerConfig, DEFAULT_DEADLINE};

/// The size of a tier, resolved against each policy's quota.
///
/// Every size is rounded down and is at least one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TierSize {
    /// The quota divided by the number of regions: the default first tier.
    Share,
    /// A percentage of the quota.
    Percent(u8),
    /// A number of requests.
    Requests(u64),
}

impl TierSize {
    /// The size in requests for `quota` shared by `regions` regions.
    pub(crate) fn resolve(self, quota: u64, regions: usize) -> u64 {
        let size = match self {
            Self::Share => quota / regions.max(1) as u64,
            Self::Percent(percent) => quota.saturating_mul(u64::from(percent)) / 100,
            Self::Requests(requests) => requests,
        };
        size.max(1)
    }
}

/// The settings of a [`RegionalStore`](crate::RegionalStore).
///
/// ```
/// use std::time::Duration;
/// use limiter_regional::{RegionalConfig, TierSize};
///
/// let config = RegionalConfig::new()
///     .step(TierSize::Percent(1))
///     .peer_deadline(Duration::from_millis(400));
/// assert_eq!(config.first_tier_size(), TierSize::Share);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionalConfig {
    pub(crate) first_tier: TierSize,
    pub(crate) step: TierSize,
    pub(crate) local_deadline: Duration,
    pub(crate) peer_deadline: Duration,
    pub(crate) connection_timeout: Duration,
    pub(crate) peer_breaker: BreakerConfig,
    pub(crate) sync_concurrency: usize,
    pub(crate) max_pending_syncs: usize,
}

impl Default for RegionalConfig {
    fn default() -> Self {
        Self {
            first_tier: TierSize::Share,
            step: TierSize::Percent(5),
            local_deadline: DEFAULT_DEADLINE,
            peer_deadline: Duration::from_millis(300),
            connection_timeout: limiter_redis::DEFAULT_CONNECTION_TIMEOUT,
            peer_breaker: BreakerConfig::default(),
            sync_concurrency: 32,
            max_pending_syncs: 10_000,
        }
    }
}

impl RegionalConfig {
    /// The defaults: the first tier at the quota divided by the number of
    /// regions, then a tier every 5% of the quota; 50 ms per call to this
    /// region's Redis, 300 ms per call to another region's; a breaker per
    /// other region opening after 3 consecutive failures and probing every
    /// second; 32 syncs at once, 10,000 waiting at most.
    pub fn new() -> Self {
        Self::default()
    }

    /// The local count at which a region first reads the others' counts.
    pub fn first_tier(mut self, size: TierSize) -> Self {
        self.first_tier = size;
        self
    }

    /// The distance between later tiers. Over-admission per window is
    /// bounded by about the number of regions times the step.
    pub fn step(mut self, size: TierSize) -> Self {
        self.step = size;
        self
    }

    /// The deadline of one call to this region's Redis (the decision's
    /// call): past it the call fails and is not replayed.
    pub fn local_deadline(mut self, deadline: Duration) -> Self {
        self.local_deadline = deadline;
        self
    }

    /// The deadline of one call to another region's Redis. Such calls run
    /// off the requests' path; past the deadline the call counts as a
    /// failure of that region.
    pub fn peer_deadline(mut self, deadline: Duration) -> Self {
        self.peer_deadline = deadline;
        self
    }

    /// The deadline of establishing a connection to any region.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// When another region's breaker opens, and how often it then probes.
    pub fn peer_breaker(mut self, breaker: BreakerConfig) -> Self {
        self.peer_breaker = breaker;
        self
    }

    /// How many syncs run at once (at least 1).
    pub fn sync_concurrency(mut self, syncs: usize) -> Self {
        self.sync_concurrency = syncs.max(1);
        self
    }

    /// How many keys may wait for a sync at once (at least 1). A tier
    /// crossed while this many wait is not synced; the key's next tier is.
    pub fn max_pending_syncs(mut self, keys: usize) -> Self {
        self.max_pending_syncs = keys.max(1);
        self
    }

    /// The size of the first tier.
    pub fn first_tier_size(&self) -> TierSize {
        self.first_tier
    }

    /// The size of the later tiers.
    pub fn step_size(&self) -> TierSize {
        self.step
    }
}
