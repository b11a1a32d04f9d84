//! A decision from the check script's reply: the single-region algorithm's
//! statuses for the totals the script counted.

use crate::algorithm::{fixed_window, sliding_window};
use crate::decision::{Decision, RuleStatus};
use crate::error::Error;
use crate::rule::Rule;

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
        ] = reply
        else {
            return Err(malformed());
        };
        let count = |n: i64| u64::try_from(n).map_err(|_| malformed());
        Ok(Self {
            allowed: allowed == 1,
            sync: sync == 1,
            start: count(start)?,
            now: count(now)?,
            total: count(total)?,
            total_before: count(total_before)?,
            exhausted: exhausted == 1,
            noticed: noticed == 1,
        })
    }

    /// The decision, with the statuses the single-region algorithm gives
    /// for the same totals at the same time.
    pub(crate) fn decide(&self, rule: Rule, sliding: bool, cost: u64) -> Result<Decision, Error> {
        let decision = if sliding {
            let mut state = Some(sliding_window::Counters {
                previous: self.total_before,
                current: self.total,
                start: self.start,
            });
            sliding_window::check(&mut state, &rule, self.now, cost)
        } else if self.exhausted {
            let ends_in = (self.start + rule.window_us()).saturating_sub(self.now);
            let status = RuleStatus {
                remaining: 0,
                available_after_us: ends_in,
            };
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
