//! GCRA, the generic cell rate algorithm, answering like redis-cell's
//! `CL.THROTTLE`.
//!
//! GCRA keeps a theoretical arrival time (TAT) and lets a request through
//! when `max(TAT, now) + cost · T <= now + τ`, with the emission interval
//! `T = period / amount` and the tolerance `τ = T · burst`. How far the TAT
//! lies ahead of now drains one microsecond per microsecond: it is a token
//! bucket's water measured in time. So the state is the bucket's [`Level`]
//! in exact sub-units (one request is `T` in units of `1 / drain` µs), and
//! `T` needs no rounding: any rate is exact, on both stores. The answers are
//! redis-cell's: remaining `⌊(τ − (TAT − now)) / T⌋`, reset after
//! `TAT − now`, retry after `new TAT − τ − now`.

use super::Micros;
use super::bucket::{self, Level, Pacing};
use crate::decision::Decision;
use crate::policy::BucketParams;
use crate::rule::Rule;

/// GCRA's check: the meter with a burst of its capacity (see
/// [`bucket`]).
#[inline]
pub fn check(
    state: &mut Option<Level>,
    params: &BucketParams,
    quota: &Rule,
    now: Micros,
    cost: u64,
) -> Decision {
    bucket::check(state, params, quota, now, cost, Pacing::Off)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Policy, Rate};

    fn check_with(policy: &Policy, state: &mut Option<Level>, now: Micros) -> Decision {
        let crate::policy::Kind::Gcra(params) = policy.kind() else {
            unreachable!()
        };
        check(state, params, &policy.rules()[0], now, 1)
    }

    #[test]
    fn answers_like_cl_throttle() {
        // CL.THROTTLE user123 15 30 60 1 -> 0, 16, 15, -1, 2
        let policy = Policy::gcra(Rate::new(30, Duration::from_secs(60)).unwrap(), 16).unwrap();
        let mut tat = None;
        let now = 1_700_000_000_000_000;
        let d = check_with(&policy, &mut tat, now);
        assert_eq!((d.allowed(), d.limit(), d.remaining()), (true, 16, 15));
        assert_eq!(
            (d.retry_after(), d.reset_after()),
            (None, Duration::from_secs(2))
        );
    }

    #[test]
    fn a_rate_whose_interval_is_not_whole_microseconds_is_exact() {
        // 3 per microsecond... per 10 µs: T = 10/3 µs. Rounding T up to 4 µs
        // would admit only 3 more in 10 µs after a burst of 3; exactly, the
        // bucket frees one request every 10/3 µs.
        let policy = Policy::gcra(Rate::new(3, Duration::from_micros(10)).unwrap(), 3).unwrap();
        let mut tat = None;
        let t0 = 1_000_000;
        for _ in 0..3 {
            assert!(check_with(&policy, &mut tat, t0).allowed());
        }
        let denied = check_with(&policy, &mut tat, t0);
        // TAT = t0 + 10; passes once new TAT − τ <= now: t0 + 10/3, so at t0 + 4 µs.
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(4)));
        // Over 30 µs after the burst: exactly 9 more (3 per 10 µs).
        let mut admitted = 0;
        for t in t0 + 1..=t0 + 30 {
            while check_with(&policy, &mut tat, t).allowed() {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 9);
    }
}
