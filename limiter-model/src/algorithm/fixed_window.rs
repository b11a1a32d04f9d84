//! The fixed window: a counter per window; a window starts at the key's first
//! request (after the previous one ended) and lasts `W`.

use super::Micros;
use crate::decision::{Decision, RuleStatus};
use crate::rule::Rule;

/// The current window's count and start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// The cost counted in the window.
    pub count: u64,
    /// When the window started.
    pub start: Micros,
}

/// Checks a request of `cost` at `now` against `rule`, given the key's
/// window (`None`: no state), which it updates when the request passes.
#[inline]
pub fn check(state: &mut Option<Window>, rule: &Rule, now: Micros, cost: u64) -> Decision {
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
    // The whole quota returns at once, when the window ends. A count above
    // the limit was counted under a larger one (a plan changed).
    let status = RuleStatus {
        remaining: rule.limit().saturating_sub(count),
        available_after_us: ends_in,
    };
    Decision::single(*rule, status, (!allowed).then_some(ends_in), 0, ends_in)
}

/// Takes `cost` recorded at `at` off the count, when the window that
/// counted it is still the key's; a window that has ended took it along.
pub fn refund(state: &mut Option<Window>, rule: &Rule, at: Micros, cost: u64) {
    if let Some(w) = state
        .as_mut()
        .filter(|w| w.start <= at && at < w.start + rule.window_us())
    {
        w.count = w.count.saturating_sub(cost);
    }
}

/// The window a key checked against `rule` inherits at `now` from a merged
/// summary of evicted windows, the largest of whose counts is `count`.
///
/// A window's phase is part of its state: the next window starts at the
/// first request after this one ends, and a merge cannot say when the key's
/// own window ends (it may have ended already). So the key's window is
/// restarted at `now` with the merge's count, capped at the limit (its own
/// count was no more). If its own window was still running, the two become
/// one longer window holding at most the limit: its own count was no larger
/// than the inherited one, and only the rest of the limit passes until
/// `now + W`. Every window of the key still holds at most its limit and lasts
/// at least `W`.
pub fn inherit(count: u64, rule: &Rule, now: Micros) -> Window {
    Window {
        count: count.min(rule.limit()),
        start: now,
    }
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

    #[test]
    fn a_count_above_a_lowered_limit_denies_until_the_window_ends() {
        let (pro, free) = (
            Rule::new(10, Duration::from_micros(100)).unwrap(),
            Rule::new(3, Duration::from_micros(100)).unwrap(),
        );
        let mut state = None;
        for _ in 0..5 {
            assert!(check(&mut state, &pro, 1_000, 1).allowed());
        }
        let denied = check(&mut state, &free, 1_050, 1);
        assert_eq!((denied.allowed(), denied.remaining()), (false, 0));
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(50)));
        assert!(check(&mut state, &free, 1_100, 1).allowed());
    }

    #[test]
    fn an_inherited_window_starts_now_with_at_most_the_limit() {
        let rule = Rule::new(3, Duration::from_micros(100)).unwrap();
        let mut state = Some(inherit(2, &rule, 1_000));
        let allowed = check(&mut state, &rule, 1_050, 1);
        assert_eq!((allowed.allowed(), allowed.remaining()), (true, 0));
        let denied = check(&mut state, &rule, 1_050, 1);
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(50)));
        let mut state = Some(inherit(7, &rule, 1_000));
        assert!(!check(&mut state, &rule, 1_099, 1).allowed());
        assert!(check(&mut state, &rule, 1_100, 1).allowed());
    }
}
