//! Counting by outcome: a request recorded when it is admitted, and given
//! back when its outcome says it does not count (a successful login under
//! a limit of failed ones).
//!
//! A refund is exact where an algorithm's state is a sum of what it
//! recorded, so that taking one request's part out leaves the state of the
//! requests that count, as if the refunded one had never been made:
//! - the sliding log removes the request's own entries (those at the time
//!   it was recorded);
//! - the fixed window takes the cost off its count, if the window that
//!   counted it is still the current one (else it has left already);
//! - the sliding window counter takes the cost off the window that counted
//!   it, the current or the previous one (else it has left already).
//!
//! The buckets and GCRA cannot: their state is clamped (a bucket never
//! holds more than its capacity), so what one request took cannot be told
//! apart once the bucket has refilled; giving it back could let more pass
//! than the rules allow. They are refused (a compile error in
//! `#[rate_limit]`, [`Error::Config`](crate::Error::Config) elsewhere).

/// Microseconds since the Unix epoch.
type Micros = u64;
use crate::error::ConfigError;
use crate::policy::{Algorithm, Policy};

/// What a store recorded for an admitted request, which
/// `limiter_core::KeyState::refund` gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    at_us: Micros,
    cost: u64,
}

impl Receipt {
    /// A request of `cost` recorded at `at_us` (microseconds since the Unix
    /// epoch, on the store's clock): for stores built outside this crate.
    pub const fn new(at_us: Micros, cost: u64) -> Self {
        Self { at_us, cost }
    }

    /// When the store recorded the request (µs since the Unix epoch, on
    /// the store's clock).
    pub const fn at_us(&self) -> Micros {
        self.at_us
    }

    /// The cost recorded.
    pub const fn cost(&self) -> u64 {
        self.cost
    }
}

impl Algorithm {
    /// Whether a request it recorded can be given back exactly (see
    /// `limiter_core::KeyState`): the sliding log and both window
    /// counters can; the buckets and GCRA cannot.
    pub const fn refunds_exactly(self) -> bool {
        matches!(
            self,
            Self::SlidingLog | Self::FixedWindow | Self::SlidingWindow
        )
    }
}

impl Policy {
    /// `Ok` when the policy's requests can be counted by outcome (recorded
    /// when admitted, given back when their outcome says they do not
    /// count); else why not.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Policy, Rate, Rule};
    ///
    /// let failures = Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?;
    /// assert!(failures.counts_by_outcome().is_ok());
    /// let gcra = Policy::gcra(Rate::new(5, Duration::from_secs(60))?, 5)?;
    /// assert!(gcra.counts_by_outcome().is_err());
    /// # Ok::<(), limiter_core::ConfigError>(())
    /// ```
    pub fn counts_by_outcome(&self) -> Result<(), ConfigError> {
        let algorithm = self.algorithm();
        if algorithm.refunds_exactly() {
            return Ok(());
        }
        Err(ConfigError::NotRefundable {
            algorithm: algorithm.name(),
        })
    }
}
