//! GCRA, the generic cell rate algorithm, answering like redis-cell's
//! `CL.THROTTLE`: the state is one value, the theoretical arrival time (TAT).

use super::Micros;
use crate::decision::{Decision, RuleStatus};
use crate::policy::GcraParams;
use crate::rule::Rule;

#[inline]
pub(crate) fn check(
    tat: &mut Option<Micros>,
    params: &GcraParams,
    quota: &Rule,
    now: Micros,
    cost: u64,
) -> Decision {
    let earliest = tat.unwrap_or(now).max(now);
    let new_tat = earliest + cost * params.interval_us;
    let (retry_after, ttl) = if new_tat > now + params.tolerance_us {
        (Some(new_tat - params.tolerance_us - now), earliest - now)
    } else {
        *tat = Some(new_tat);
        (None, new_tat - now)
    };
    let status = RuleStatus {
        remaining: (params.tolerance_us - ttl) / params.interval_us,
        reset_after_us: ttl,
    };
    Decision::single(*quota, status, retry_after, 0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Policy, Rate};

    #[test]
    fn answers_like_cl_throttle() {
        // CL.THROTTLE user123 15 30 60 1 -> 0, 16, 15, -1, 2
        let policy = Policy::gcra(Rate::new(30, Duration::from_secs(60)).unwrap(), 16).unwrap();
        let crate::policy::Kind::Gcra(params) = policy.kind() else {
            unreachable!()
        };
        let quota = policy.rules()[0];
        let mut tat = None;
        let now = 1_700_000_000_000_000;
        let d = check(&mut tat, &params, &quota, now, 1);
        assert_eq!((d.allowed(), d.limit(), d.remaining()), (true, 16, 15));
        assert_eq!(
            (d.retry_after(), d.reset_after()),
            (None, Duration::from_secs(2))
        );
    }
}
