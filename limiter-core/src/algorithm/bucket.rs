//! The token bucket and the leaky bucket: one meter seen from two sides.
//!
//! The state is the water level in sub-units (one token is `unit` sub-units);
//! it drains `drain` sub-units per microsecond. A token bucket's tokens are
//! the room left above the water; a leaky bucket additionally answers how long
//! an allowed request waits for the water ahead of it to leak out.

use super::Micros;
use crate::decision::{Decision, RuleStatus};
use crate::policy::BucketParams;
use crate::rule::Rule;

/// The water level and when it was last brought up to date.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Level {
    pub(crate) level: u64,
    pub(crate) updated: Micros,
}

/// Whether allowed requests are told to wait their turn (the leaky bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pacing {
    Off,
    On,
}

#[inline]
pub(crate) fn check(
    state: &mut Option<Level>,
    params: &BucketParams,
    quota: &Rule,
    now: Micros,
    cost: u64,
    pacing: Pacing,
) -> Decision {
    let (mut level, updated) = match *state {
        Some(s) => (s.level, s.updated),
        None => (0, now),
    };
    if now > updated {
        let elapsed = now - updated;
        // Compare times first so `elapsed * drain` cannot overflow.
        level = if elapsed >= level.div_ceil(params.drain) {
            0
        } else {
            level - elapsed * params.drain
        };
    }
    let need = cost * params.unit;
    let full = params.full();
    let allowed = level + need <= full;
    let (retry_after, delay) = if allowed {
        let waits = match pacing {
            Pacing::On => level.div_ceil(params.drain),
            Pacing::Off => 0,
        };
        level += need;
        *state = Some(Level {
            level,
            updated: now.max(updated),
        });
        (None, waits)
    } else {
        (Some((level + need - full).div_ceil(params.drain)), 0)
    };
    let remaining = (full - level) / params.unit;
    let available_after_us = match retry_after {
        Some(wait) => wait,
        // One token more than remaining fits once the water is that low.
        None if level > 0 => {
            (level - (full - (remaining + 1) * params.unit)).div_ceil(params.drain)
        }
        None => 0,
    };
    let status = RuleStatus {
        remaining,
        available_after_us,
    };
    Decision::single(
        *quota,
        status,
        retry_after,
        delay,
        level.div_ceil(params.drain),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Policy, Rate};

    fn params(policy: &Policy) -> BucketParams {
        match policy.kind() {
            crate::policy::Kind::TokenBucket(p) | crate::policy::Kind::LeakyBucket(p) => p,
            _ => unreachable!(),
        }
    }

    #[test]
    fn tokens_refill_at_the_rate_up_to_the_capacity() {
        let policy = Policy::token_bucket(Rate::per_second(1).unwrap(), 10).unwrap();
        let (p, quota) = (params(&policy), policy.rules()[0]);
        let mut state = None;
        let t0 = 1_000_000_000;
        let d = check(&mut state, &p, &quota, t0, 10, Pacing::Off);
        assert_eq!((d.allowed(), d.remaining()), (true, 0));
        assert_eq!(d.reset_after(), Duration::from_secs(10));
        let denied = check(&mut state, &p, &quota, t0 + 1_500_000, 2, Pacing::Off);
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
        assert_eq!(denied.remaining(), 1);
        let d = check(&mut state, &p, &quota, t0 + 2_000_000, 2, Pacing::Off);
        assert_eq!((d.allowed(), d.remaining()), (true, 0));
        // An hour later the bucket is full, not overflowing.
        let d = check(&mut state, &p, &quota, t0 + 3_600_000_000, 1, Pacing::Off);
        assert_eq!(d.remaining(), 9);
    }

    #[test]
    fn the_leaky_bucket_paces_allowed_requests() {
        let policy = Policy::leaky_bucket(Rate::per_second(4).unwrap(), 3).unwrap();
        let (p, quota) = (params(&policy), policy.rules()[0]);
        let mut state = None;
        let delays: Vec<_> = (0..3)
            .map(|_| check(&mut state, &p, &quota, 0, 1, Pacing::On).delay())
            .collect();
        assert_eq!(delays, [0, 250, 500].map(Duration::from_millis));
        let denied = check(&mut state, &p, &quota, 0, 1, Pacing::On);
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(250)));
        assert_eq!(denied.delay(), Duration::ZERO);
    }
}
