//! How the Redis store connects, how long it waits, and whether it
//! batches checks that meet a call in flight.

use std::time::Duration;

/// How long making a connection to Redis may take unless configured.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_millis(500);

/// How the Redis store connects and how long it waits.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    pub(super) response_timeout: Duration,
    pub(super) connection_timeout: Duration,
    pub(super) coalesce: bool,
    pub(super) max_penalty_blocks: usize,
    /// The time every script takes instead of the server's, in tests.
    pub(super) manual_clock: Option<limiter_core::ManualClock>,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            response_timeout: limiter_core::DEFAULT_DEADLINE,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            coalesce: true,
            max_penalty_blocks: limiter_core::DEFAULT_MAX_PENALTY_BLOCKS,
            manual_clock: None,
        }
    }
}

impl RedisConfig {
    /// The default: 50 ms per call, 500 ms to connect, checks meeting a
    /// call in flight batched ([`coalesce`](Self::coalesce)), at most
    /// [`DEFAULT_MAX_PENALTY_BLOCKS`](limiter_core::DEFAULT_MAX_PENALTY_BLOCKS)
    /// penalty blocks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call takes its time from `clock` instead of the Redis
    /// server's: for tests that drive windows by hand or compare the stores
    /// on the same timestamps. In production, instances with skewed clocks
    /// would disagree; a permit taken on it is not renewed. The instance's
    /// tables of blocks and overrides keep the system clock.
    #[cfg(feature = "test-util")]
    pub fn manual_clock(mut self, clock: limiter_core::ManualClock) -> Self {
        self.manual_clock = Some(clock);
        self
    }

    /// The deadline of one call, all of it (connecting, loading the script,
    /// following redirections): past it the call fails with a timeout and is
    /// not replayed (it may have executed).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The deadline of establishing a connection. A connection is made in
    /// the background: a call that reaches its own deadline first fails,
    /// and the attempt goes on for the calls after it.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Whether checks that meet a call in flight wait for the next call
    /// (the default), which decides each exactly as if they had come one
    /// after another:
    /// - checks of one key: while a call for a key is in flight, this
    ///   process's further checks of that key under the same policy go
    ///   together in the next call. A hot key then costs Redis one call per
    ///   round trip rather than one per check;
    /// - checks of other keys: while a check's call is in flight to a
    ///   node (the Redis, or on a Cluster the node serving the key's slot),
    ///   the first checks of other keys of that node go together in the
    ///   next call to it, one for each policy among them. Many distinct
    ///   keys then cost Redis a call's fixed part once a batch.
    ///
    /// A check that meets no call in flight sends its own at once. `false`
    /// sends every check in a call of its own.
    ///
    /// ```
    /// use limiter_redis::RedisConfig;
    ///
    /// let direct = RedisConfig::new().coalesce(false);
    /// ```
    pub fn coalesce(mut self, coalesce: bool) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// How many penalty-earned blocks are kept at most (at least 1), in
    /// Redis and in each instance's copy: past it, the one that ends
    /// soonest gives way to the new one, so a flood of made-up identities
    /// earning blocks costs bounded memory and never stops a later
    /// offender from being blocked. Operator blocks are bounded apart
    /// ([`MAX_BLOCKS`](limiter_core::MAX_BLOCKS), refused past it). Give
    /// every instance sharing a Redis the same bound.
    ///
    /// ```
    /// use limiter_redis::RedisConfig;
    ///
    /// let config = RedisConfig::new().max_penalty_blocks(20_000);
    /// ```
    pub fn max_penalty_blocks(mut self, blocks: usize) -> Self {
        self.max_penalty_blocks = blocks.max(1);
        self
    }
}
