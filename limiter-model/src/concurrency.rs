//! The concurrency limit: at most `max` requests of a key in flight at once
//! (the permits that count them are the runtime's: `limiter_core::Permit`).

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::on_store_error::OnStoreError;
use crate::rule::{EXACT_LIMIT, MAX_WINDOW, Rule};

/// At most `max` requests of a key in flight at once, across every instance
/// sharing the store.
///
/// On the Redis store each permit is a lease: a permit whose holder stops
/// renewing it (its instance died) is given back when its lease ends
/// ([`DEFAULT_LEASE`](Self::DEFAULT_LEASE) unless set). A denied request is
/// told to retry after [`RETRY_AFTER`](Self::RETRY_AFTER): when a request in
/// flight ends is unknown.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Acquired, ConcurrencyLimit, Limiter, MemoryStore};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let exports = ConcurrencyLimit::new(2)?.with_lease(Duration::from_secs(10))?;
/// assert_eq!(exports.name(), "2-concurrent");
/// let limiter = Limiter::new(MemoryStore::new());
/// let first = limiter.acquire_permit("laoqian:exports", &exports).await?;
/// let second = limiter.acquire_permit("laoqian:exports", &exports).await?;
/// let third = limiter.acquire_permit("laoqian:exports", &exports).await?;
/// assert!(first.allowed() && second.allowed());
/// assert!(!third.allowed());
/// assert_eq!(third.decision().retry_after(), Some(ConcurrencyLimit::RETRY_AFTER));
/// drop(first); // the export finished: its permit is given back
/// assert!(limiter.acquire_permit("laoqian:exports", &exports).await?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConcurrencyLimit {
    max: u64,
    lease_us: u64,
    /// What the guard decides when the store fails; `None`: its own.
    on_store_error: Option<OnStoreError>,
}

impl ConcurrencyLimit {
    /// The shortest lease: renewed every third of it, a lease much shorter
    /// would spend its holder's time renewing.
    pub const MIN_LEASE: Duration = Duration::from_millis(100);
    /// The lease unless set: an instance that dies holds its permits this
    /// long at most.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
    /// The retry time a denied request is given (`Retry-After: 1`).
    pub const RETRY_AFTER: Duration = Duration::from_secs(1);

    /// At most `max` requests in flight. Refused for 0, and above 2^50.
    pub fn new(max: u64) -> Result<Self, ConfigError> {
        if max == 0 {
            return Err(ConfigError::ZeroConcurrency);
        }
        if max > EXACT_LIMIT {
            return Err(ConfigError::TooLarge {
                what: "a concurrency limit",
                detail: format!("{max} > 2^50"),
            });
        }
        Ok(Self {
            max,
            lease_us: Self::DEFAULT_LEASE.as_micros() as u64,
            on_store_error: None,
        })
    }

    /// How long a permit lasts unless renewed: from
    /// [`MIN_LEASE`](Self::MIN_LEASE) to [`MAX_WINDOW`](crate::MAX_WINDOW).
    /// The holder renews it every third of it.
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, ConfigError> {
        if lease < Self::MIN_LEASE || lease > MAX_WINDOW {
            return Err(ConfigError::LeaseOutOfRange { lease });
        }
        self.lease_us = lease.as_micros() as u64;
        Ok(self)
    }

    /// How many requests of a key may be in flight at once.
    pub const fn max(&self) -> u64 {
        self.max
    }

    /// How long a permit lasts unless renewed.
    pub const fn lease(&self) -> Duration {
        Duration::from_micros(self.lease_us)
    }

    /// How long a permit's lease lasts, in µs: what a shared store
    /// renews its permits by.
    pub const fn lease_us(&self) -> u64 {
        self.lease_us
    }

    /// The name of its `RateLimit` item: `2-concurrent`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// The quota a decision reports: the limit, with the lease standing for
    /// the window a concurrency limit does not have.
    pub const fn quota(&self) -> Rule {
        Rule::from_parts(self.max, self.lease_us)
    }

    /// The same limit, decided by `on_error` when the store fails, whatever
    /// the failure policy of the guard in front of it (`limiter_core::Guarded`).
    /// The HTTP layers' setting (a route's `on_store_error`, else its
    /// router layer's) wins over it.
    pub const fn with_on_store_error(mut self, on_error: OnStoreError) -> Self {
        self.on_store_error = Some(on_error);
        self
    }

    /// What the guard decides for this limit when the store fails; `None`:
    /// the guard's own failure policy.
    pub const fn on_store_error(&self) -> Option<OnStoreError> {
        self.on_store_error
    }

    /// This limit's share for one of `instances` instances, each limiting
    /// on its own (the fallback when the shared store is down): the maximum
    /// divided, rounded down, at least 1.
    pub fn divided(&self, instances: u32) -> Self {
        Self {
            max: (self.max / u64::from(instances.max(1))).max(1),
            ..*self
        }
    }
}

impl fmt::Display for ConcurrencyLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-concurrent", self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_limits_name_themselves() {
        assert_eq!(
            ConcurrencyLimit::new(0).unwrap_err().to_string(),
            "a concurrency limit must allow at least 1 request in flight, got 0"
        );
        let limit = ConcurrencyLimit::new(2).unwrap();
        assert_eq!(
            limit
                .with_lease(Duration::from_millis(99))
                .unwrap_err()
                .to_string(),
            "a concurrency lease lasts 100ms to 366 days, got 99ms"
        );
        assert_eq!(limit.lease(), ConcurrencyLimit::DEFAULT_LEASE);
        assert_eq!(limit.divided(4).max(), 1);
        assert_eq!(ConcurrencyLimit::new(9).unwrap().divided(4).max(), 2);
    }
}
