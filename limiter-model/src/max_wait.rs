//! How long a request over its limit may wait for its retry time instead of
//! being denied: checked where it is configured (the `#[rate_limit]`
//! attribute checks it when it compiles).

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::rule::MAX_WINDOW;
use crate::span::Span;

/// The longest a request may wait for its retry time before it is denied:
/// from 1 ms to [`MAX_WINDOW`](crate::MAX_WINDOW).
///
/// ```
/// use std::time::Duration;
/// use limiter_core::MaxWait;
///
/// let wait = MaxWait::new(Duration::from_secs(2))?;
/// assert_eq!(wait.get(), Duration::from_secs(2));
/// assert!(MaxWait::new(Duration::ZERO).is_err());
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaxWait(Duration);

impl MaxWait {
    /// The shortest bound: a shorter wait could not outlast a store's answer.
    pub const MIN: Duration = Duration::from_millis(1);

    /// A bound of `max`. Refused under [`MIN`](Self::MIN) and above
    /// [`MAX_WINDOW`](crate::MAX_WINDOW).
    pub fn new(max: Duration) -> Result<Self, ConfigError> {
        if max < Self::MIN || max > MAX_WINDOW {
            return Err(ConfigError::WaitOutOfRange { wait: max });
        }
        Ok(Self(max))
    }

    /// The bound.
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl fmt::Display for MaxWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Span(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_outside_one_millisecond_to_366_days_are_refused() {
        assert_eq!(
            MaxWait::new(Duration::from_micros(999))
                .unwrap_err()
                .to_string(),
            "a request waits 1ms to 366 days for its retry time, got 999us"
        );
        assert!(MaxWait::new(MAX_WINDOW + Duration::from_secs(1)).is_err());
        assert_eq!(MaxWait::new(MAX_WINDOW).unwrap().get(), MAX_WINDOW);
        assert_eq!(
            MaxWait::new(Duration::from_secs(2)).unwrap().to_string(),
            "2s"
        );
    }
}
