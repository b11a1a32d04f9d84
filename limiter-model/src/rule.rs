//! The quantities a policy is made of: a [`Rule`] (at most `limit` requests in
//! any `window`) and a [`Rate`] (`amount` per `period`, for the buckets and GCRA).

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::span::write_duration;

/// The longest window or period a rule or rate may have: 366 days.
pub const MAX_WINDOW: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// The largest integer both stores compute with exactly. Redis's Lua numbers
/// are doubles (exact to 2^53); staying under 2^50 leaves room for the sums
/// and products of one step.
pub(crate) const EXACT_LIMIT: u64 = 1 << 50;

/// At most `limit` requests in any window of `window`.
///
/// Displayed as `{limit}-per-{window}`, for example `10-per-60s`: the name the
/// rule carries in `RateLimit` headers and logs.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::Rule;
///
/// let rule = Rule::new(10, Duration::from_secs(60))?;
/// assert_eq!(rule.to_string(), "10-per-60s");
/// assert!(Rule::new(0, Duration::from_secs(60)).is_err());
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rule {
    limit: u64,
    window_us: u64,
}

impl Rule {
    /// A rule allowing `limit` requests in any `window`.
    ///
    /// Refused: a zero limit, a window under 1 µs, a window over [`MAX_WINDOW`],
    /// a limit over 2^50.
    pub fn new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit { window });
        }
        let window_us = window.as_micros();
        if window_us == 0 {
            return Err(ConfigError::ZeroWindow { limit, window });
        }
        if window > MAX_WINDOW {
            return Err(ConfigError::WindowTooLong { window });
        }
        if limit > EXACT_LIMIT {
            return Err(ConfigError::TooLarge {
                what: "the limit of a rule",
                detail: format!("{limit} > 2^50"),
            });
        }
        Ok(Self {
            limit,
            window_us: window_us as u64,
        })
    }

    /// How many requests the rule allows per window.
    #[inline]
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The window.
    pub const fn window(&self) -> Duration {
        Duration::from_micros(self.window_us)
    }

    /// The window in microseconds.
    #[inline]
    pub const fn window_us(&self) -> u64 {
        self.window_us
    }

    /// A rule from trusted parts, for quotas derived from an already valid policy.
    pub const fn from_parts(limit: u64, window_us: u64) -> Self {
        Self { limit, window_us }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-per-", self.limit)?;
        write_duration(f, self.window_us)
    }
}

/// `amount` requests (or tokens) per `period`: how fast a bucket refills or
/// leaks, and GCRA's steady rate.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::Rate;
///
/// let rate = Rate::new(100, Duration::from_secs(60))?;
/// assert_eq!(rate, Rate::per_minute(100)?);
/// assert!(Rate::per_second(0).is_err());
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    amount: u64,
    period_us: u64,
}

impl Rate {
    /// `amount` per `period`. Refused: a zero amount, a period under 1 µs or over [`MAX_WINDOW`].
    pub fn new(amount: u64, period: Duration) -> Result<Self, ConfigError> {
        let period_us = period.as_micros();
        if amount == 0 || period_us == 0 {
            return Err(ConfigError::ZeroRate { amount, period });
        }
        if period > MAX_WINDOW {
            return Err(ConfigError::PeriodTooLong { period });
        }
        if amount > EXACT_LIMIT {
            return Err(ConfigError::TooLarge {
                what: "the amount of a rate",
                detail: format!("{amount} > 2^50"),
            });
        }
        Ok(Self {
            amount,
            period_us: period_us as u64,
        })
    }

    /// `amount` per second.
    pub fn per_second(amount: u64) -> Result<Self, ConfigError> {
        Self::new(amount, Duration::from_secs(1))
    }

    /// `amount` per minute.
    pub fn per_minute(amount: u64) -> Result<Self, ConfigError> {
        Self::new(amount, Duration::from_secs(60))
    }

    /// `amount` per hour.
    pub fn per_hour(amount: u64) -> Result<Self, ConfigError> {
        Self::new(amount, Duration::from_secs(3600))
    }

    /// How many requests (tokens) per period.
    pub const fn amount(&self) -> u64 {
        self.amount
    }

    /// The period.
    pub const fn period(&self) -> Duration {
        Duration::from_micros(self.period_us)
    }

    pub(crate) const fn period_us(&self) -> u64 {
        self.period_us
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.amount)?;
        write_duration(f, self.period_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_named_by_their_largest_whole_unit() {
        let name = |limit, window| Rule::new(limit, window).unwrap().to_string();
        assert_eq!(name(10, Duration::from_secs(60)), "10-per-60s");
        assert_eq!(name(1, Duration::from_millis(1500)), "1-per-1500ms");
        assert_eq!(name(5, Duration::from_secs(7200)), "5-per-2h");
        assert_eq!(name(3, Duration::from_secs(86400)), "3-per-1d");
        assert_eq!(name(3, Duration::from_micros(7)), "3-per-7us");
    }

    #[test]
    fn invalid_rules_name_the_value() {
        let err = |limit, window| Rule::new(limit, window).unwrap_err().to_string();
        assert_eq!(
            err(0, Duration::from_secs(60)),
            "the limit of a rule must be at least 1, got 0 (window 60s)"
        );
        assert_eq!(
            err(10, Duration::ZERO),
            "the window of a rule must be at least 1 µs, got 0ns (limit 10)"
        );
        assert_eq!(
            err(10, Duration::from_nanos(999)),
            "the window of a rule must be at least 1 µs, got 999ns (limit 10)"
        );
        assert_eq!(
            err(10, Duration::from_secs(367 * 86400)),
            "the window of a rule must be at most 366 days, got 367d"
        );
        assert_eq!(
            err(1 << 51, Duration::from_secs(1)),
            "the limit of a rule is too large to compute exactly: 2251799813685248 > 2^50"
        );
        assert!(Rule::new(10, MAX_WINDOW).is_ok());
    }

    #[test]
    fn invalid_rates_name_the_value() {
        let err = |amount, period| Rate::new(amount, period).unwrap_err().to_string();
        assert_eq!(
            err(0, Duration::from_secs(1)),
            "a rate must allow at least 1 request over a period of at least 1 µs, got 0 per 1s"
        );
        assert_eq!(
            err(5, Duration::ZERO),
            "a rate must allow at least 1 request over a period of at least 1 µs, got 5 per 0ns"
        );
        assert_eq!(
            err(5, Duration::from_secs(400 * 86400)),
            "the period of a rate must be at most 366 days, got 400d"
        );
    }
}
