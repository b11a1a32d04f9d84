//! A decision from the check script's reply: the single-region algorithm's
//! answer for this region's counts against its lease, told against the
//! whole quota.

use std::time::Duration;

use limiter_core::Rule;
use limiter_core::backend::{fixed_window, sliding_window};
use limiter_core::{Algorithm, ConfigError, Error, Policy};
use limiter_core::{Decision, RuleStatus};

/// The check script's reply (see `check.lua`).
#[derive(Debug)]
pub(crate) struct CheckReply {
    pub(crate) allowed: bool,
    /// How much to ask the others for; 0: no ask.
    pub(crate) ask: u64,
    pub(crate) start: u64,
    pub(crate) now: u64,
    /// This region's count in the window before this request, and in the
    /// window before.
    pub(crate) count: u64,
    pub(crate) previous: u64,
    /// This region's lease of the window's quota.
    pub(crate) lease: u64,
    /// An ask of this key and window is out.
    pub(crate) asking: bool,
}

impl CheckReply {
    pub(crate) fn parse(reply: &[i64]) -> Result<Self, Error> {
        let malformed = || Error::Protocol(format!("regional check reply {reply:?}"));
        let &[allowed, ask, start, now, count, previous, lease, asking] = reply else {
            return Err(malformed());
        };
        // Times and counts the scripts compute exactly (below 2^53): the
        // arithmetic on them cannot overflow.
        let number = |n: i64| {
            u64::try_from(n)
                .ok()
                .filter(|&n| n < 1 << 53)
                .ok_or_else(malformed)
        };
        Ok(Self {
            allowed: allowed == 1,
            ask: number(ask)?,
            start: number(start)?,
            now: number(now)?,
            count: number(count)?,
            previous: number(previous)?,
            lease: number(lease)?,
            asking: asking == 1,
        })
    }

    /// The decision: the single-region algorithm's, for this region's
    /// counts against its lease, under `rule` (the whole quota): what
    /// remains is what this region may still admit without asking. A
    /// request denied while an ask is out is told to retry after `ask_wait`
    /// at most, when the answer may have brought room.
    pub(crate) fn decide(
        &self,
        rule: Rule,
        sliding: bool,
        cost: u64,
        ask_wait: Duration,
    ) -> Result<Decision, Error> {
        let w = rule.window_us();
        let ends_in = (self.start + w).saturating_sub(self.now);
        let local = match Rule::new(self.lease, rule.window()) {
            Ok(lease) if sliding => sliding_window::check(
                &mut Some(sliding_window::Counters {
                    previous: self.previous,
                    current: self.count,
                    start: self.start,
                }),
                &lease,
                self.now,
                cost,
            ),
            Ok(lease) => fixed_window::check(
                &mut Some(fixed_window::Window {
                    count: self.count,
                    start: self.start,
                }),
                &lease,
                self.now,
                cost,
            ),
            // No lease at all: nothing passes until the others give some
            // or the window ends.
            Err(_) => {
                Decision::single(rule, RuleStatus::new(0, ends_in), Some(ends_in), 0, ends_in)
            }
        };
        if local.allowed() != self.allowed {
            return Err(Error::Protocol(format!(
                "regional check reply {self:?} disagrees with the algorithm"
            )));
        }
        let status = local.rules()[0];
        let retry = local.retry_after().map(|retry| {
            let retry = retry.as_micros() as u64;
            if self.asking {
                retry.min(ask_wait.as_micros() as u64).max(1)
            } else {
                retry
            }
        });
        let status = match retry {
            Some(retry) if self.asking => RuleStatus::new(status.remaining(), retry),
            _ => status,
        };
        Ok(Decision::single(
            rule,
            status,
            retry,
            0,
            local.reset_after_us(),
        ))
    }
}

/// The one rule of a regional policy, and whether it is the sliding window
/// counter; other algorithms, and costs the policy refuses, are errors.
pub(crate) fn regional_rule(policy: &Policy, cost: u64) -> Result<(Rule, bool), Error> {
    policy.validate_cost(cost)?;
    let sliding = match policy.algorithm() {
        Algorithm::FixedWindow => false,
        Algorithm::SlidingWindow => true,
        other => {
            return Err(ConfigError::AlgorithmNotSupported {
                store: "regional store",
                supported: "fixed_window and sliding_window",
                algorithm: other.name(),
            }
            .into());
        }
    };
    Ok((policy.rules()[0], sliding))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASK_WAIT: Duration = Duration::from_millis(300);

    fn rule() -> Rule {
        Rule::new(30, Duration::from_secs(1)).unwrap()
    }

    /// A reply at 250 ms into the window starting at 5 s, this region
    /// holding a lease of `lease` and having counted `count`.
    fn reply(allowed: bool, count: u64, lease: u64, asking: bool) -> Vec<i64> {
        vec![
            allowed.into(),
            0,
            5_000_000,
            5_250_000,
            count as i64,
            0,
            lease as i64,
            asking.into(),
        ]
    }

    #[test]
    fn what_remains_is_this_regions_lease_told_against_the_whole_quota() {
        let parsed = CheckReply::parse(&reply(true, 12, 20, false)).unwrap();
        let allowed = parsed.decide(rule(), false, 1, ASK_WAIT).unwrap();
        assert!(allowed.allowed());
        assert_eq!(allowed.limit(), 30);
        assert_eq!(allowed.remaining(), 7);
        assert_eq!(allowed.reset_after(), Duration::from_millis(750));
    }

    #[test]
    fn a_spent_lease_denies_until_the_window_ends_or_an_ask_is_answered() {
        let spent = CheckReply::parse(&reply(false, 10, 10, false)).unwrap();
        let denied = spent.decide(rule(), false, 1, ASK_WAIT).unwrap();
        assert!(!denied.allowed());
        assert_eq!(denied.remaining(), 0);
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(750)));
        let asking = CheckReply::parse(&reply(false, 10, 10, true)).unwrap();
        let denied = asking.decide(rule(), false, 1, ASK_WAIT).unwrap();
        assert_eq!(denied.retry_after(), Some(ASK_WAIT));
        // No lease at all (every share given away).
        let none = CheckReply::parse(&reply(false, 0, 0, false)).unwrap();
        let denied = none.decide(rule(), false, 1, ASK_WAIT).unwrap();
        assert_eq!(denied.limit(), 30);
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(750)));
    }

    #[test]
    fn a_reply_that_makes_no_sense_is_refused() {
        let protocol = |reply: &[i64]| matches!(CheckReply::parse(reply), Err(Error::Protocol(_)));
        assert!(protocol(&reply(true, 12, 20, false)[..7]));
        assert!(protocol(&reply(true, u64::MAX >> 1, 20, false)));
        let mut negative = reply(true, 12, 20, false);
        negative[3] = -1;
        assert!(protocol(&negative));
        // Allowed by the script, over the lease by its own counts.
        let parsed = CheckReply::parse(&reply(true, 20, 20, false)).unwrap();
        assert!(matches!(
            parsed.decide(rule(), false, 1, ASK_WAIT),
            Err(Error::Protocol(_))
        ));
    }
}
