//! The answer to a check.

use std::time::Duration;

use crate::rule::Rule;

/// The most rules one policy may hold (a sliding log's rules plus its
/// prevent-duplicate rule). Kept small so a [`Decision`] needs no allocation.
pub const MAX_RULES: usize = 8;

/// Where one rule of the policy stands after a check: the `RateLimit` header
/// item of that rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleStatus {
    pub(crate) rule: Rule,
    pub(crate) remaining: u64,
    pub(crate) reset_after_us: u64,
}

impl RuleStatus {
    /// A placeholder for the unused slots of an inline array.
    pub(crate) const EMPTY: Self = Self {
        rule: Rule::from_parts(1, 1),
        remaining: 0,
        reset_after_us: 0,
    };

    /// The rule (for the buckets and GCRA: the quota they describe, see
    /// [`Policy::rules`](crate::Policy::rules)).
    pub const fn rule(&self) -> Rule {
        self.rule
    }

    /// How many more requests of cost 1 this rule would allow now.
    pub const fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Time until this rule's whole quota is available again.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_micros(self.reset_after_us)
    }
}

/// The answer to a check: allowed or not, and the numbers that go into
/// `Retry-After` and `RateLimit` headers.
///
/// The "deciding rule" is, for a denied request, the violated rule that frees
/// up last (the one `retry_after` waits for); for an allowed request, the rule
/// with the fewest requests remaining. [`limit`](Self::limit) and
/// [`remaining`](Self::remaining) are that rule's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    allowed: bool,
    decided_by: u8,
    len: u8,
    retry_after_us: Option<u64>,
    reset_after_us: u64,
    delay_us: u64,
    statuses: [RuleStatus; MAX_RULES],
}

impl Decision {
    /// A decision over the given per-rule statuses.
    ///
    /// `decided_by` indexes `statuses`. `retry_after_us` is `Some` exactly when
    /// the request is denied.
    pub(crate) fn new(
        statuses: &[RuleStatus],
        decided_by: usize,
        retry_after_us: Option<u64>,
        delay_us: u64,
    ) -> Self {
        debug_assert!(decided_by < statuses.len() && statuses.len() <= MAX_RULES);
        let mut inline = [RuleStatus::EMPTY; MAX_RULES];
        inline[..statuses.len()].copy_from_slice(statuses);
        let reset_after_us = statuses.iter().map(|s| s.reset_after_us).max().unwrap_or(0);
        Self {
            allowed: retry_after_us.is_none(),
            decided_by: decided_by as u8,
            len: statuses.len() as u8,
            retry_after_us,
            reset_after_us,
            delay_us,
            statuses: inline,
        }
    }

    /// Whether the request may proceed.
    pub const fn allowed(&self) -> bool {
        self.allowed
    }

    /// The deciding rule's limit.
    pub fn limit(&self) -> u64 {
        self.deciding().rule.limit()
    }

    /// How many more requests of cost 1 the deciding rule allows now.
    pub fn remaining(&self) -> u64 {
        self.deciding().remaining
    }

    /// When denied: the exact time until the same request would be allowed,
    /// if nothing else is allowed meanwhile. `None` when allowed.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_us.map(Duration::from_micros)
    }

    /// Time until every rule's whole quota is available again.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_micros(self.reset_after_us)
    }

    /// For a pacing algorithm (the leaky bucket): how long the caller should
    /// wait before acting on an allowed request, so requests leave evenly.
    /// Zero for every other algorithm and for denied requests.
    pub const fn delay(&self) -> Duration {
        Duration::from_micros(self.delay_us)
    }

    /// The rule that decided (see the type's docs).
    pub fn rule(&self) -> Rule {
        self.deciding().rule
    }

    /// The index of the deciding rule in [`Policy::rules`](crate::Policy::rules).
    pub const fn rule_index(&self) -> usize {
        self.decided_by as usize
    }

    /// Every rule's status, in the policy's order.
    pub fn rules(&self) -> &[RuleStatus] {
        &self.statuses[..self.len as usize]
    }

    fn deciding(&self) -> &RuleStatus {
        &self.statuses[self.decided_by as usize]
    }

    pub(crate) const fn reset_after_us(&self) -> u64 {
        self.reset_after_us
    }

    /// An allowed decision made without the store (failing open): every rule's
    /// whole quota remains.
    pub(crate) fn unchecked(policy: &crate::Policy) -> Self {
        let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
        for (status, rule) in statuses.iter_mut().zip(policy.rules()) {
            *status = RuleStatus {
                rule: *rule,
                remaining: rule.limit(),
                reset_after_us: 0,
            };
        }
        Self::new(&statuses[..policy.rules().len()], 0, None, 0)
    }

    /// The same decision `elapsed_us` later, nothing else having happened:
    /// every wait is shorter by that much.
    pub(crate) fn aged(mut self, elapsed_us: u64) -> Self {
        self.retry_after_us = self.retry_after_us.map(|r| r.saturating_sub(elapsed_us));
        self.reset_after_us = self.reset_after_us.saturating_sub(elapsed_us);
        for status in &mut self.statuses[..self.len as usize] {
            status.reset_after_us = status.reset_after_us.saturating_sub(elapsed_us);
        }
        self
    }
}
