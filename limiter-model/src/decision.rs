//! The answer to a check.

use std::time::Duration;

use crate::policy::MAX_RULES;
use crate::rule::Rule;

/// Where one rule of the policy stands after a check: the `RateLimit` header
/// item of that rule. Which rule it is follows from its place: statuses come
/// in the order of [`Policy::rules`](crate::Policy::rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleStatus {
    pub(crate) remaining: u64,
    pub(crate) available_after_us: u64,
}

impl RuleStatus {
    /// The status of a rule that allows `remaining` more requests of cost
    /// 1 now, and makes more quota available in `available_after_us` µs.
    pub const fn new(remaining: u64, available_after_us: u64) -> Self {
        Self {
            remaining,
            available_after_us,
        }
    }

    /// A placeholder for the unused slots of an inline array.
    pub const EMPTY: Self = Self {
        remaining: 0,
        available_after_us: 0,
    };

    /// How many more requests of cost 1 this rule would allow now.
    pub const fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Time until this rule makes more quota available (the `t` of its
    /// `RateLimit` item): for a rule that denied the request, until it would
    /// let the same request pass; otherwise until it allows one request more
    /// than [`remaining`](Self::remaining). Zero when its whole quota is
    /// available.
    pub const fn available_after(&self) -> Duration {
        Duration::from_micros(self.available_after_us)
    }
}

/// The answer to a check: allowed or not, and the numbers that go into
/// `Retry-After` and `RateLimit` headers.
///
/// The "deciding rule" is, for a denied request, the violated rule that frees
/// up last (the one `retry_after` waits for); for an allowed request, the rule
/// with the fewest requests remaining. [`limit`](Self::limit) and
/// [`remaining`](Self::remaining) are that rule's.
///
/// Small and `Copy` (every rule's status is inline, no allocation): a check
/// on the memory store returns it by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// When denied, the retry-after; when allowed, the pacing delay.
    wait_us: u64,
    /// The time until every rule is clear (below 2^50), with who decided and the flags
    /// above it (see [`Flags`]): together they keep the decision within
    /// 128 bytes.
    reset_and_flags: u64,
    /// The deciding rule.
    rule: Rule,
    statuses: [RuleStatus; MAX_RULES],
}

// Moved without a `memcpy` call (see `MAX_RULES`); checks return it by value.
const _: () = assert!(std::mem::size_of::<Decision>() <= 128);

/// The top byte of `reset_and_flags`: bit 7 allowed, bits 3..6 the deciding
/// rule's index, bits 0..2 the number of rules. Below it, bits 50..51 say
/// who decided ([`Decider`]), and the low 50 bits hold the reset: times are
/// below 2^50 µs (35 years; a longer one is held as that).
struct Flags;

impl Flags {
    const SHIFT: u32 = 56;
    const DECIDER_SHIFT: u32 = 50;
    const DECIDER: u64 = 0b11 << Self::DECIDER_SHIFT;
    const RESET: u64 = (1 << Self::DECIDER_SHIFT) - 1;

    const fn pack(allowed: bool, decided_by: usize, len: usize, reset_after_us: u64) -> u64 {
        let flags = ((allowed as u64) << 7) | ((decided_by as u64) << 3) | len as u64;
        let reset = if reset_after_us > Self::RESET {
            Self::RESET
        } else {
            reset_after_us
        };
        (flags << Self::SHIFT) | reset
    }
}

/// Who decided a request: the store, or, when the store could not answer or
/// was not asked, what stood in for it (see `limiter_core::Guarded`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decider {
    /// The store (or the algorithm itself, in memory).
    Store,
    /// A denial the store made earlier, remembered until it ends (the
    /// guard's deny cache, a hot key's lease).
    DenyCache,
    /// The local fallback limiter, the store having failed.
    Fallback,
    /// Nobody: let through unchecked, the store having failed (fail open).
    /// Every rule's whole quota is reported.
    FailedOpen,
}

impl Decider {
    const ALL: [Self; 4] = [
        Self::Store,
        Self::DenyCache,
        Self::Fallback,
        Self::FailedOpen,
    ];
}

impl Decision {
    /// A decision over the per-rule statuses of `rules`.
    ///
    /// `decided_by` indexes both. `retry_after_us` is `Some` exactly when
    /// the request is denied; `reset_after_us` is when every rule is clear.
    pub fn new(
        rules: &[Rule],
        statuses: &[RuleStatus],
        decided_by: usize,
        retry_after_us: Option<u64>,
        delay_us: u64,
        reset_after_us: u64,
    ) -> Self {
        debug_assert!(
            decided_by < statuses.len()
                && statuses.len() == rules.len()
                && statuses.len() <= MAX_RULES
        );
        let mut inline = [RuleStatus::EMPTY; MAX_RULES];
        inline[..statuses.len()].copy_from_slice(statuses);
        Self::from_statuses(
            rules[decided_by],
            inline,
            statuses.len(),
            decided_by,
            retry_after_us,
            delay_us,
            reset_after_us,
        )
    }

    /// A decision of a one-rule policy: `Some(retry_after_us)` when denied.
    #[inline]
    pub fn single(
        rule: Rule,
        status: RuleStatus,
        retry_after_us: Option<u64>,
        delay_us: u64,
        reset_after_us: u64,
    ) -> Self {
        let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
        statuses[0] = status;
        Self::from_statuses(
            rule,
            statuses,
            1,
            0,
            retry_after_us,
            delay_us,
            reset_after_us,
        )
    }

    /// A decision over the statuses of a policy's first `len` rules, given
    /// inline (the rest [`RuleStatus::EMPTY`]): no copy into another array.
    #[inline]
    pub(crate) fn from_statuses(
        rule: Rule,
        statuses: [RuleStatus; MAX_RULES],
        len: usize,
        decided_by: usize,
        retry_after_us: Option<u64>,
        delay_us: u64,
        reset_after_us: u64,
    ) -> Self {
        Self {
            wait_us: retry_after_us.unwrap_or(delay_us),
            reset_and_flags: Flags::pack(retry_after_us.is_none(), decided_by, len, reset_after_us),
            rule,
            statuses,
        }
    }

    const fn flags(&self) -> u64 {
        self.reset_and_flags >> Flags::SHIFT
    }

    const fn len(&self) -> usize {
        (self.flags() & 0b111) as usize
    }

    /// Whether the request may proceed.
    pub const fn allowed(&self) -> bool {
        self.flags() >> 7 == 1
    }

    /// The deciding rule's limit.
    pub const fn limit(&self) -> u64 {
        self.rule.limit()
    }

    /// How many more requests of cost 1 the deciding rule allows now.
    pub const fn remaining(&self) -> u64 {
        self.statuses[self.rule_index()].remaining
    }

    /// When denied: the exact time until the same request would be allowed,
    /// if nothing else is allowed meanwhile. `None` when allowed.
    pub const fn retry_after(&self) -> Option<Duration> {
        if self.allowed() {
            None
        } else {
            Some(Duration::from_micros(self.wait_us))
        }
    }

    /// Time until every rule's whole quota is available again.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_micros(self.reset_after_us())
    }

    /// For a pacing algorithm (the leaky bucket): how long the caller should
    /// wait before acting on an allowed request, so requests leave evenly.
    /// Zero for every other algorithm and for denied requests.
    pub const fn delay(&self) -> Duration {
        if self.allowed() {
            Duration::from_micros(self.wait_us)
        } else {
            Duration::ZERO
        }
    }

    /// The rule that decided (see the type's docs).
    pub const fn rule(&self) -> Rule {
        self.rule
    }

    /// The index of the deciding rule in [`Policy::rules`](crate::Policy::rules).
    pub const fn rule_index(&self) -> usize {
        ((self.flags() >> 3) & 0b1111) as usize
    }

    /// Every rule's status, in the order of
    /// [`Policy::rules`](crate::Policy::rules).
    pub fn rules(&self) -> &[RuleStatus] {
        &self.statuses[..self.len()]
    }

    /// The time until every rule is clear, in µs.
    pub const fn reset_after_us(&self) -> u64 {
        self.reset_and_flags & Flags::RESET
    }

    /// Who decided the request.
    pub const fn decider(&self) -> Decider {
        let bits = (self.reset_and_flags & Flags::DECIDER) >> Flags::DECIDER_SHIFT;
        Decider::ALL[bits as usize]
    }

    /// The same decision, as made by `decider`.
    pub const fn by(mut self, decider: Decider) -> Self {
        self.reset_and_flags =
            (self.reset_and_flags & !Flags::DECIDER) | ((decider as u64) << Flags::DECIDER_SHIFT);
        self
    }

    /// An allowed decision made without the store (not checked, or failing
    /// open): every rule's whole quota remains.
    pub fn unchecked(policy: &crate::Policy) -> Self {
        let rules = policy.rules();
        let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
        for (status, rule) in statuses.iter_mut().zip(rules) {
            *status = RuleStatus {
                remaining: rule.limit(),
                available_after_us: 0,
            };
        }
        Self::new(rules, &statuses[..rules.len()], 0, None, 0, 0)
    }

    /// A denial by a block of `left`: every rule's quota withheld until the
    /// block ends, whatever the rules would say.
    pub fn blocked(policy: &crate::Policy, left: std::time::Duration) -> Self {
        let left_us = u64::try_from(left.as_micros()).unwrap_or(u64::MAX);
        let rules = policy.rules();
        let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
        for status in &mut statuses[..rules.len()] {
            status.available_after_us = left_us;
        }
        Self::new(
            rules,
            &statuses[..rules.len()],
            0,
            Some(left_us),
            0,
            left_us,
        )
    }

    /// The same decision `elapsed_us` later, nothing else having happened:
    /// every wait is shorter by that much.
    pub fn aged(mut self, elapsed_us: u64) -> Self {
        self.wait_us = self.wait_us.saturating_sub(elapsed_us);
        let reset = self.reset_after_us().saturating_sub(elapsed_us);
        self.reset_and_flags = (self.reset_and_flags & !Flags::RESET) | reset;
        let len = self.len();
        for status in &mut self.statuses[..len] {
            status.available_after_us = status.available_after_us.saturating_sub(elapsed_us);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Who decided is kept beside the reset, and changes nothing else.
    #[test]
    fn the_decider_changes_no_other_field() {
        let rules = [
            Rule::from_parts(5, 60_000_000),
            Rule::from_parts(9, 600_000_000),
        ];
        let statuses = [
            RuleStatus {
                remaining: 0,
                available_after_us: 7,
            },
            RuleStatus {
                remaining: 3,
                available_after_us: 0,
            },
        ];
        let made = Decision::new(&rules, &statuses, 0, Some(7), 0, Flags::RESET);
        assert_eq!(made.decider(), Decider::Store);
        for decider in Decider::ALL {
            let by = made.by(decider);
            assert_eq!(by.decider(), decider);
            assert_eq!(by.by(Decider::Store), made);
            let fields = |d: &Decision| {
                (
                    d.allowed(),
                    d.rule_index(),
                    d.rules().to_vec(),
                    d.retry_after(),
                    d.reset_after_us(),
                    d.remaining(),
                )
            };
            assert_eq!(fields(&by), fields(&made), "{decider:?}");
        }
    }

    /// A reset past 2^50 µs is held as the longest one, never spilling
    /// into the decider.
    #[test]
    fn a_reset_past_the_bound_is_held_at_it() {
        let rule = Rule::from_parts(1, 1);
        let decision = Decision::single(rule, RuleStatus::EMPTY, None, 0, u64::MAX);
        assert_eq!(decision.reset_after_us(), Flags::RESET);
        assert_eq!(decision.decider(), Decider::Store);
    }
}
