//! Penalties: after `after` denials of an identity by a limit within
//! `within`, the identity is blocked, for longer on each repeat offence.

use std::collections::VecDeque;
use std::time::Duration;

/// Microseconds since the Unix epoch.
type Micros = u64;
use crate::error::ConfigError;
use crate::rule::MAX_WINDOW;

/// The most steps of escalation a penalty has.
pub const MAX_PENALTY_STEPS: usize = 8;
/// The most denials a penalty counts before it blocks.
pub const MAX_PENALTY_DENIALS: u32 = 1_000;

/// After `after` denials within `within`, a block of `blocks[0]`; the next
/// offence, if it comes within `within` of the end of the previous block,
/// a block of `blocks[1]`, and so on (the last repeating); an identity that
/// stayed clean that long starts again at `blocks[0]`.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::Penalty;
///
/// let minutes = |m: u64| Duration::from_secs(60 * m);
/// // After 3 denials in 10 minutes: 15 minutes, then 1 hour, then 24 hours.
/// let penalty = Penalty::new(3, minutes(10), [minutes(15), minutes(60), minutes(1440)])?;
/// assert_eq!(penalty.after(), 3);
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Penalty {
    after: u32,
    within_us: Micros,
    blocks_us: Box<[Micros]>,
}

impl Penalty {
    /// A penalty of `blocks` (1 to [`MAX_PENALTY_STEPS`], each 1 s to 366
    /// days) after `after` (1 to [`MAX_PENALTY_DENIALS`]) denials within
    /// `within` (1 ms to 366 days).
    pub fn new(
        after: u32,
        within: Duration,
        blocks: impl IntoIterator<Item = Duration>,
    ) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidPenalty { reason };
        if !(1..=MAX_PENALTY_DENIALS).contains(&after) {
            return Err(invalid(format!(
                "`after` counts 1 to {MAX_PENALTY_DENIALS} denials, got {after}"
            )));
        }
        if within < Duration::from_millis(1) || within > MAX_WINDOW {
            return Err(invalid(format!(
                "`within` is 1 ms to 366 days, got {within:?}"
            )));
        }
        let blocks: Vec<Duration> = blocks.into_iter().collect();
        if blocks.is_empty() || blocks.len() > MAX_PENALTY_STEPS {
            return Err(invalid(format!(
                "`block` lists 1 to {MAX_PENALTY_STEPS} durations, got {}",
                blocks.len()
            )));
        }
        if let Some(bad) = blocks
            .iter()
            .find(|b| **b < Duration::from_secs(1) || **b > MAX_WINDOW)
        {
            return Err(invalid(format!(
                "each block lasts 1 s to 366 days, got {bad:?}"
            )));
        }
        Ok(Self {
            after,
            within_us: within.as_micros() as Micros,
            blocks_us: blocks.iter().map(|b| b.as_micros() as Micros).collect(),
        })
    }

    /// The denials that earn a block.
    pub fn after(&self) -> u32 {
        self.after
    }

    /// The period they are counted in, µs.
    pub fn within_us(&self) -> Micros {
        self.within_us
    }

    /// The blocks of each offence, µs.
    pub fn blocks_us(&self) -> &[Micros] {
        &self.blocks_us
    }
}

/// One identity's penalty state under one limit: the times of its recent
/// denials, its offences, and until when the next offence escalates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PenaltyState {
    denials: VecDeque<Micros>,
    offences: u32,
    escalates_until: Micros,
}

impl PenaltyState {
    /// Records a denial at `now`; answers the block it earns, if any.
    pub fn record(&mut self, penalty: &Penalty, now: Micros) -> Option<Duration> {
        let since = now.saturating_sub(penalty.within_us);
        while self.denials.front().is_some_and(|&t| t <= since) {
            self.denials.pop_front();
        }
        self.denials.push_back(now);
        if self.denials.len() < penalty.after as usize {
            return None;
        }
        self.denials.clear();
        if now >= self.escalates_until {
            self.offences = 0;
        }
        let steps = &penalty.blocks_us;
        let block = steps[(self.offences as usize).min(steps.len() - 1)];
        self.offences += 1;
        self.escalates_until = now + block + penalty.within_us;
        Some(Duration::from_micros(block))
    }

    /// When the state means the same as none.
    pub fn expires_at(&self, penalty: &Penalty) -> Micros {
        let last = self.denials.back().map_or(0, |&t| t + penalty.within_us);
        last.max(self.escalates_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    fn penalty() -> Penalty {
        let m = |m: u64| Duration::from_secs(60 * m);
        Penalty::new(3, m(10), [m(15), m(60)]).unwrap()
    }

    #[test]
    fn three_denials_within_the_period_block_and_the_next_offence_escalates() {
        let p = penalty();
        let mut state = PenaltyState::default();
        let t0 = 1_000 * S;
        assert_eq!(state.record(&p, t0), None);
        assert_eq!(state.record(&p, t0 + 100 * S), None);
        // The first denial left the 10 minutes: still two.
        assert_eq!(state.record(&p, t0 + 600 * S), None);
        assert_eq!(
            state.record(&p, t0 + 601 * S),
            Some(Duration::from_secs(900))
        );
        // Within 10 minutes of the block's end (t0 + 1501 s): escalated.
        let t1 = t0 + 1_501 * S + 599 * S;
        state.record(&p, t1);
        state.record(&p, t1);
        assert_eq!(state.record(&p, t1), Some(Duration::from_secs(3_600)));
        // The last step repeats.
        let t2 = t1 + 3_600 * S;
        for _ in 0..2 {
            state.record(&p, t2);
        }
        assert_eq!(state.record(&p, t2), Some(Duration::from_secs(3_600)));
        // Clean for 10 minutes after the block: forgiven.
        let t3 = t2 + 3_600 * S + 600 * S;
        for _ in 0..2 {
            state.record(&p, t3);
        }
        assert_eq!(state.record(&p, t3), Some(Duration::from_secs(900)));
    }

    #[test]
    fn bad_penalties_say_why() {
        let m = Duration::from_secs(60);
        for (after, within, blocks) in [
            (0, m, vec![m]),
            (3, Duration::ZERO, vec![m]),
            (3, m, vec![]),
            (3, m, vec![Duration::from_millis(500)]),
            (3, m, vec![m; 9]),
        ] {
            let error = Penalty::new(after, within, blocks).unwrap_err();
            assert!(
                error.to_string().starts_with("invalid penalty: "),
                "{error}"
            );
        }
    }
}
