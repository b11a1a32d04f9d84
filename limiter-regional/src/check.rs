//! A decision from the check script's reply: the single-region algorithm's
//! statuses for the totals the script counted.

use std::time::Duration;

use limiter_core::Error;
use limiter_core::Rule;
use limiter_core::backend::{fixed_window, sliding_window};
use limiter_core::{Decision, RuleStatus};

/// The check script's reply (see `check.lua`).
#[derive(Debug)]
pub(crate) struct CheckReply {
    pub(crate) allowed: bool,
    pub(crate) sync: bool,
    pub(crate) start: u64,
    pub(crate) now: u64,
    /// The window's total before this request, and the previous window's.
    pub(crate) total: u64,
    pub(crate) total_before: u64,
    pub(crate) exhausted: bool,
    pub(crate) noticed: bool,
    /// Denied while this region was held to its share of what remained.
    pub(crate) held: bool,
}

impl CheckReply {
    pub(crate) fn parse(reply: &[i64]) -> Result<Self, Error> {
        let malformed = || Error::Protocol(format!("regional check reply {reply:?}"));
        let &[
            allowed,
            sync,
            start,
            now,
            _own,
            _own_before,
            total,
            total_before,
            exhausted,
            noticed,
            held,
        ] = reply
        else {
            return Err(malformed());
        };
        // Times and counts the scripts compute exactly (below 2^53): the
        // arithmetic on them cannot overflow.
        let count = |n: i64| {
            u64::try_from(n)
                .ok()
                .filter(|&n| n < 1 << 53)
                .ok_or_else(malformed)
        };
        Ok(Self {
            allowed: allowed == 1,
            sync: sync == 1,
            start: count(start)?,
            now: count(now)?,
            total: count(total)?,
            total_before: count(total_before)?,
            exhausted: exhausted == 1,
            noticed: noticed == 1,
            held: held == 1,
        })
    }

    /// The decision, with the statuses the single-region algorithm gives
    /// for the same totals at the same time.
    /// A held check is denied for `hold` at most: by then its sync has
    /// completed or failed.
    pub(crate) fn decide(
        &self,
        rule: Rule,
        sliding: bool,
        cost: u64,
        hold: Duration,
    ) -> Result<Decision, Error> {
        let ends_in = (self.start + rule.window_us()).saturating_sub(self.now);
        if self.held {
            let retry = (hold.as_micros() as u64).clamp(1, ends_in.max(1));
            let status = RuleStatus::new(0, retry);
            return Ok(Decision::single(rule, status, Some(retry), 0, ends_in));
        }
        let decision = if sliding {
            let mut state = Some(sliding_window::Counters {
                previous: self.total_before,
                current: self.total,
                start: self.start,
            });
            sliding_window::check(&mut state, &rule, self.now, cost)
        } else if self.exhausted {
            let status = RuleStatus::new(0, ends_in);
            Decision::single(rule, status, Some(ends_in), 0, ends_in)
        } else {
            let mut state = Some(fixed_window::Window {
                count: self.total,
                start: self.start,
            });
            fixed_window::check(&mut state, &rule, self.now, cost)
        };
        if decision.allowed() != self.allowed {
            return Err(Error::Protocol(format!(
                "regional check reply {self:?} disagrees with the algorithm"
            )));
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_millis(300);

    fn rule() -> Rule {
        Rule::new(30, Duration::from_secs(1)).unwrap()
    }

    /// A reply at 250 ms into the window starting at 5 s.
    fn reply(allowed: bool, total: u64, exhausted: bool) -> Vec<i64> {
        let total = total as i64;
        vec![
            allowed.into(),
            0,
            5_000_000,
            5_250_000,
            0,
            0,
            total,
            0,
            exhausted.into(),
            0,
            0,
        ]
    }

    #[test]
    fn an_announced_quota_denies_until_the_window_ends() {
        let parsed = CheckReply::parse(&reply(false, 12, true)).unwrap();
        let denied = parsed.decide(rule(), false, 1, HOLD).unwrap();
        assert!(!denied.allowed());
        assert_eq!(denied.remaining(), 0);
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(750)));
    }

    #[test]
    fn a_held_check_is_denied_until_its_sync_can_have_completed() {
        let mut held = reply(false, 12, false);
        held[10] = 1;
        let denied = CheckReply::parse(&held)
            .unwrap()
            .decide(rule(), false, 1, HOLD)
            .unwrap();
        assert!(!denied.allowed());
        assert_eq!(denied.retry_after(), Some(HOLD));
        assert_eq!(denied.reset_after(), Duration::from_millis(750));
        // Never past the window's end, when the hold goes with the window.
        let late = denied_near_the_end();
        assert_eq!(late.retry_after(), Some(Duration::from_millis(750)));
    }

    fn denied_near_the_end() -> Decision {
        let mut held = reply(false, 12, false);
        held[10] = 1;
        CheckReply::parse(&held)
            .unwrap()
            .decide(rule(), false, 1, Duration::from_secs(5))
            .unwrap()
    }

    #[test]
    fn the_statuses_are_the_single_region_algorithms() {
        let parsed = CheckReply::parse(&reply(true, 12, false)).unwrap();
        let allowed = parsed.decide(rule(), false, 1, HOLD).unwrap();
        assert_eq!(allowed.remaining(), 17);
        assert_eq!(allowed.reset_after(), Duration::from_millis(750));
    }

    #[test]
    fn a_reply_that_makes_no_sense_is_refused() {
        let protocol = |reply: &[i64]| matches!(CheckReply::parse(reply), Err(Error::Protocol(_)));
        assert!(protocol(&reply(true, 12, false)[..10]));
        assert!(protocol(&reply(true, u64::MAX >> 1, false)));
        let mut negative = reply(true, 12, false);
        negative[3] = -1;
        assert!(protocol(&negative));
        // Allowed by the script, full by its own totals.
        let parsed = CheckReply::parse(&reply(true, 30, false)).unwrap();
        assert!(matches!(
            parsed.decide(rule(), false, 1, HOLD),
            Err(Error::Protocol(_))
        ));
    }
}
