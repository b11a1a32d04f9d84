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

/// The water level, when it was last brought up to date, and the size of
/// its sub-unit (one token's worth of water).
///
/// The sub-unit depends on the rate, so the level keeps it: a key whose
/// policy changes (a plan changed at run time) reads its water in the new
/// policy's sub-units (see `Level::in_units_of`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Level {
    /// The water in sub-units.
    pub level: u64,
    /// When the level was last brought up to date.
    pub updated: Micros,
    /// One token in sub-units when the level was written; 0 in a default
    /// (empty) level.
    pub unit: u64,
}

impl Level {
    /// The water of this level, at its update, in `params`' sub-units and
    /// within `params`' bucket.
    ///
    /// Under the sub-unit it was written in, the level as it is. Under
    /// another, the same number of tokens, a partly drained token counted
    /// whole: the requests a key's bucket counted stay counted when its
    /// policy changes. Either way no more than the bucket holds: a bucket
    /// made smaller is full.
    #[inline]
    pub fn in_units_of(&self, params: &BucketParams) -> u64 {
        if self.unit == params.unit || self.level == 0 {
            return self.level.min(params.full());
        }
        let tokens = self.level.div_ceil(self.unit.max(1));
        if tokens >= params.capacity {
            params.full()
        } else {
            tokens * params.unit
        }
    }
}

/// Whether allowed requests are told to wait their turn (the leaky bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// The token bucket and GCRA: an allowed request goes at once.
    Off,
    /// The leaky bucket: an allowed request waits for the water ahead of it.
    On,
}

/// Checks a request of `cost` at `now` against the meter of `params`
/// (whose one rule is `quota`), given the key's level (`None`: no state),
/// which it updates when the request passes.
#[inline(always)]
pub fn check(
    state: &mut Option<Level>,
    params: &BucketParams,
    quota: &Rule,
    now: Micros,
    cost: u64,
    pacing: Pacing,
) -> Decision {
    let (mut level, updated) = match *state {
        Some(s) => (s.in_units_of(params), s.updated),
        None => (0, now),
    };
    if now > updated {
        // What drained since, saturating: a level drains to 0 at most (a
        // multiplication where a division would do, one instruction fewer
        // than `div_ceil` on every check).
        let drained = (now - updated).saturating_mul(params.drain);
        level = level.saturating_sub(drained);
    }
    let need = cost * params.unit;
    let full = params.full();
    let allowed = level + need <= full;
    let (retry_after, delay) = if allowed {
        let waits = match pacing {
            Pacing::On => params.drain_us(level),
            Pacing::Off => 0,
        };
        level += need;
        *state = Some(Level {
            level,
            updated: now.max(updated),
            unit: params.unit,
        });
        (None, waits)
    } else {
        (Some(params.drain_us(level + need - full)), 0)
    };
    let remaining = (full - level) / params.unit;
    let available_after_us = match retry_after {
        Some(wait) => wait,
        // One token more than remaining fits once the water is that low.
        None if level > 0 => params.drain_us(level - (full - (remaining + 1) * params.unit)),
        None => 0,
    };
    let status = RuleStatus {
        remaining,
        available_after_us,
    };
    Decision::single(*quota, status, retry_after, delay, params.drain_us(level))
}

/// The bucket a key inherits from a merged summary of evicted buckets that
/// are all empty by `empty_at` (the memory store keeps no more of them).
///
/// A bucket of this policy that empties by `empty_at` holds at most
/// `(empty_at - now) · drain` sub-units now (a stored level empties
/// `ceil(level / drain)` µs after its update, so rounding only raises the
/// bound, by less than one microsecond of drain), and never more than full:
/// this level denies whatever that bucket would, and nothing after `empty_at`.
pub fn empty_by(empty_at: Micros, params: &BucketParams, now: Micros) -> Option<Level> {
    let left = empty_at.checked_sub(now).filter(|&left| left > 0)?;
    Some(Level {
        level: left.saturating_mul(params.drain).min(params.full()),
        updated: now,
        unit: params.unit,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Policy, Rate};

    fn params(policy: &Policy) -> BucketParams {
        match policy.kind() {
            crate::policy::Kind::TokenBucket(p) | crate::policy::Kind::LeakyBucket(p) => *p,
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

    #[test]
    fn a_bucket_whose_rate_changes_keeps_its_requests_counted() {
        let minute = Duration::from_secs(60);
        let pro = Policy::token_bucket(Rate::new(100, minute).unwrap(), 100).unwrap();
        let free = Policy::token_bucket(Rate::new(10, minute).unwrap(), 10).unwrap();
        let check_with = |policy: &Policy, state: &mut Option<Level>, now| {
            check(
                state,
                &params(policy),
                &policy.rules()[0],
                now,
                1,
                Pacing::Off,
            )
        };
        let t0 = 1_000_000_000;
        let mut state = None;
        for _ in 0..4 {
            assert!(check_with(&pro, &mut state, t0).allowed());
        }
        // Pro drains a token in 0.6 s: after 0.3 s, 3.5 tokens, and one more.
        let later = t0 + 300_000;
        assert!(check_with(&pro, &mut state, later).allowed());
        // Under free, the partly drained token counts whole: 5 tokens, and
        // this request's sixth leaves room for 4.
        let d = check_with(&free, &mut state, later);
        assert_eq!((d.allowed(), d.remaining()), (true, 4));
        // Back to pro at once: the 6 tokens count, the seventh leaves 93.
        let d = check_with(&pro, &mut state, later);
        assert_eq!((d.allowed(), d.remaining()), (true, 93));
        // Lowered below its water, the bucket is full: the next request
        // waits one token of the new rate.
        let mut full = None;
        for _ in 0..30 {
            check_with(&pro, &mut full, t0);
        }
        let denied = check_with(&free, &mut full, t0);
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(6)));
        assert_eq!(denied.remaining(), 0);
        // Over the next minute the free plan admits its rate and no more.
        let admitted = (1..=60)
            .filter(|s| check_with(&free, &mut full, t0 + s * 1_000_000).allowed())
            .count();
        assert_eq!(admitted, 10);
    }

    #[test]
    fn a_bucket_rebuilt_from_when_it_empties_denies_what_the_original_denies() {
        // 7 tokens per second: one token is 1,000,000 sub-units, 7 drain per µs.
        let policy = Policy::token_bucket(Rate::per_second(7).unwrap(), 3).unwrap();
        let (p, quota) = (params(&policy), policy.rules()[0]);
        let t0 = 1_000_000_000;
        let mut original = None;
        check(&mut original, &p, &quota, t0, 3, Pacing::Off);
        let empty_at = t0 + original.unwrap().level.div_ceil(p.drain);
        let now = t0 + 100_001;
        let mut rebuilt = empty_by(empty_at, &p, now);
        // Rounding up costs less than one microsecond of drain.
        let drained = check(&mut original.clone(), &p, &quota, now, 1, Pacing::Off);
        assert!(!drained.allowed());
        let level_now = original.unwrap().level - (now - t0) * p.drain;
        let level = rebuilt.unwrap().level;
        assert!((level_now..level_now + p.drain).contains(&level), "{level}");
        for at in [now, now + 142_857, empty_at - 1, empty_at] {
            let expected = check(&mut original.clone(), &p, &quota, at, 1, Pacing::Off);
            let got = check(&mut rebuilt.clone(), &p, &quota, at, 1, Pacing::Off);
            assert_eq!(got.allowed(), expected.allowed(), "at {at}");
            assert!(got.retry_after() >= expected.retry_after(), "at {at}");
        }
        rebuilt = empty_by(empty_at, &p, empty_at);
        assert_eq!(rebuilt, None, "empty by now: nothing to inherit");
    }
}
