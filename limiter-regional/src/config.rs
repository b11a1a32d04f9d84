//! How a regional store reaches the regions: deadlines, breakers, and how
//! many asks for spare shares run or wait.

use std::time::Duration;

use limiter_core::{BreakerConfig, DEFAULT_DEADLINE};

/// The settings of a [`RegionalStore`](crate::RegionalStore).
///
/// ```
/// use std::time::Duration;
/// use limiter_regional::RegionalConfig;
///
/// let config = RegionalConfig::new().peer_deadline(Duration::from_millis(400));
/// assert_eq!(config.ask_timeout(), Duration::from_millis(800));
/// ```
#[derive(Debug, Clone)]
pub struct RegionalConfig {
    pub(crate) local_deadline: Duration,
    pub(crate) peer_deadline: Duration,
    pub(crate) connection_timeout: Duration,
    pub(crate) peer_breaker: BreakerConfig,
    pub(crate) ask_concurrency: usize,
    pub(crate) max_pending_asks: usize,
    pub(crate) reclaim_after: Duration,
    /// The time every call takes instead of the servers', in tests.
    pub(crate) manual_clock: Option<limiter_core::ManualClock>,
}

impl Default for RegionalConfig {
    fn default() -> Self {
        Self {
            local_deadline: DEFAULT_DEADLINE,
            peer_deadline: Duration::from_millis(300),
            connection_timeout: limiter_redis::DEFAULT_CONNECTION_TIMEOUT,
            peer_breaker: BreakerConfig::default(),
            ask_concurrency: 512,
            max_pending_asks: 10_000,
            reclaim_after: Duration::from_secs(5),
            manual_clock: None,
        }
    }
}

impl RegionalConfig {
    /// The defaults: 50 ms per call to this region's Redis, 300 ms per call
    /// to another region's; a breaker per other region opening after 3
    /// consecutive failures and probing every second; 512 asks at once,
    /// 10,000 keys waiting at most; a region out of touch taken over after
    /// 5 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call, in this region and to the others, takes its time from
    /// `clock` instead of the Redis servers': for tests that drive windows
    /// by hand only.
    #[cfg(feature = "test-util")]
    pub fn manual_clock(mut self, clock: limiter_core::ManualClock) -> Self {
        self.manual_clock = Some(clock);
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

    /// How many asks for the other regions' spare shares run at once (at
    /// least 1). An ask is a call to each other region (pipelined on one
    /// connection each) and one to this region's Redis: they cost little
    /// while they wait, so the default is wide enough that a flood of keys
    /// asking does not queue a real key's ask behind a window's worth of them.
    pub fn ask_concurrency(mut self, asks: usize) -> Self {
        self.ask_concurrency = asks.max(1);
        self
    }

    /// How many keys may wait to ask at once (at least 1). Past it a key's
    /// ask is dropped: the key keeps its lease and asks again at a later check.
    pub fn max_pending_asks(mut self, keys: usize) -> Self {
        self.max_pending_asks = keys.max(1);
        self
    }

    /// How long after a region was last heard from the others take its
    /// share, in the windows that start from then on, when more than half
    /// of the regions agree (at least 1 s). A region out of touch with more
    /// than half of the regions for a quarter of it (the lapse) stops
    /// spending its share, and spends it again in the windows that start a
    /// lapse and 100 ms after contact comes back. Each instance sends each
    /// other region a heartbeat every twentieth of it. With two regions
    /// nothing is taken (no majority without both). See docs/regions.md,
    /// "A region cut off".
    pub fn reclaim_after(mut self, after: Duration) -> Self {
        self.reclaim_after = after.max(Duration::from_secs(1));
        self
    }

    /// How long a key's ask may stay unanswered before the key may ask
    /// again: twice the peer deadline (the calls to the other regions, then
    /// the one to this region's Redis).
    pub fn ask_timeout(&self) -> Duration {
        self.peer_deadline * 2
    }
}
