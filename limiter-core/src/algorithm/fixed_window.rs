//! The fixed window: a counter per window; a window starts at the key's first
//! request (after the previous one ended) and lasts `W`.

use super::Micros;
use crate::decision::{Decision, RuleStatus};
use crate::rule::Rule;

/// The current window's count and start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) count: u64,
    pub(crate) start: Micros,
}

#[inline]
pub(crate) fn check(state: &mut Option<Window>, rule: &Rule, now: Micros, cost: u64) -> Decision {
    let current = match *state {
        Some(w) if now < w.start + rule.window_us() => w,
        _ => Window {
            count: 0,
            start: now,
        },
    };
    let ends_in = current.start + rule.window_us() - now;
    let allowed = current.count + cost <= rule.limit();
    let count = if allowed {
        current.count + cost
    } else {
        current.count
    };
    if allowed {
        *state = Some(Window { count, ..current });
    }
    // The whole quota returns at once, when the window ends.
    let status = RuleStatus {
        remaining: rule.limit() - count,
        available_after_us: ends_in,
    };
    Decision::single(*rule, status, (!allowed).then_some(ends_in), 0, ends_in)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_window_starts_at_the_first_request() {
        let rule = Rule::new(2, Duration::from_micros(100)).unwrap();
        let mut state = None;
        assert!(check(&mut state, &rule, 1_050, 1).allowed());
        assert!(check(&mut state, &rule, 1_100, 1).allowed());
        let denied = check(&mut state, &rule, 1_149, 1);
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(1)));
        assert_eq!(denied.remaining(), 0);
        let next = check(&mut state, &rule, 1_150, 1);
        assert!(next.allowed());
        assert_eq!(next.reset_after(), Duration::from_micros(100));
    }
}
