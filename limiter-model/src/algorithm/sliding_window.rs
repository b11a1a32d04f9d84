//! The sliding window counter: windows aligned to multiples of `W`; the
//! previous window's count is weighted by how much of it still overlaps
//! `(now - W, now]`, as if its requests were spread evenly.
//!
//! The weight is an IEEE double, computed in exactly this order by the Lua
//! script too, so both stores agree to the bit.

use super::Micros;
use crate::decision::{Decision, RuleStatus};
use crate::rule::Rule;

/// The counts of the current and the previous window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// The count of the previous window.
    pub previous: u64,
    /// The count of the current window.
    pub current: u64,
    /// Start of the current window, a multiple of `W`.
    pub start: Micros,
}

/// Checks a request of `cost` at `now` against `rule`, given the key's
/// counters (`None`: no state), which it updates when the request passes.
#[inline]
pub fn check(state: &mut Option<Counters>, rule: &Rule, now: Micros, cost: u64) -> Decision {
    let w = rule.window_us();
    let mut start = now - now % w;
    let (previous, current) = match *state {
        // A stored window later than now's (clocks disagree) stays current:
        // counting it keeps the limit exact.
        Some(c) if c.start >= start => {
            start = c.start;
            (c.previous, c.current)
        }
        Some(c) if c.start + w == start => (c.current, 0),
        _ => (0, 0),
    };
    let elapsed = now.saturating_sub(start);
    let estimate = Estimate {
        w,
        limit: rule.limit(),
        cost,
    };
    let allowed = estimate.passes(previous, current, elapsed);
    let mut retry_after = None;
    let current = if allowed {
        *state = Some(Counters {
            previous,
            current: current + cost,
            start,
        });
        current + cost
    } else {
        retry_after = Some(estimate.retry_after(previous, current, start, now));
        current
    };
    let used = estimate.weighted(previous, current, elapsed);
    let reset_after_us = if current > 0 {
        start + 2 * w - now
    } else if previous > 0 {
        start + w - now
    } else {
        0
    };
    let remaining = (rule.limit() as f64 - used).max(0.0).floor() as u64;
    let available_after_us = match retry_after {
        Some(wait) => wait,
        None if remaining < rule.limit() => {
            // One more request fits once a request costing one more than
            // what remains would pass.
            let more = Estimate {
                cost: remaining + 1,
                ..estimate
            };
            more.retry_after(previous, current, start, now)
        }
        None => 0,
    };
    let status = RuleStatus {
        remaining,
        available_after_us,
    };
    Decision::single(*rule, status, retry_after, 0, reset_after_us)
}

/// Takes `cost` recorded at `at` off the window that counted it, the
/// current or the previous one; an older window has left the estimate.
pub fn refund(state: &mut Option<Counters>, rule: &Rule, at: Micros, cost: u64) {
    let w = rule.window_us();
    let counted_in = at - at % w;
    if let Some(c) = state.as_mut() {
        if c.start == counted_in {
            c.current = c.current.saturating_sub(cost);
        } else if c.start == counted_in + w {
            c.previous = c.previous.saturating_sub(cost);
        }
    }
}

/// Counters evicted from the memory store, with the length of the windows
/// they count in: the one the key was checked with, or 0 once counters of
/// windows of different lengths were merged (their counts cannot be added up
/// window by window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evicted {
    /// The counters of the key.
    pub counters: Counters,
    /// The window they count in, µs.
    pub window_us: Micros,
}

impl Evicted {
    /// Counters the store held until `expires_at`. Stored counters always
    /// count a request in their current window (they are written only when a
    /// request passes), so they expire exactly two windows after their start:
    /// that gives the window's length.
    pub fn new(counters: Counters, expires_at: Micros) -> Self {
        Self {
            counters,
            window_us: expires_at.saturating_sub(counters.start) / 2,
        }
    }

    /// Folds `other` in: both brought to the later start, each count the
    /// larger of the two, so every future estimate is at least either's.
    pub fn merge(&mut self, other: Self) {
        let w = self.window_us;
        if w == 0 || w != other.window_us {
            *self = Self::default();
            return;
        }
        let start = self.counters.start.max(other.counters.start);
        let at_start = |c: Counters| match c.start {
            s if s == start => (c.previous, c.current),
            s if s + w == start => (c.current, 0),
            _ => (0, 0),
        };
        let (mine, theirs) = (at_start(self.counters), at_start(other.counters));
        self.counters = Counters {
            previous: mine.0.max(theirs.0),
            current: mine.1.max(theirs.1),
            start,
        };
    }

    /// The counters a key checked against `rule` inherits from this merged
    /// summary, which expires at `expires_at`. Counters of this window length
    /// are inherited as they are, each capped at the limit. A summary of another window length only
    /// cannot hold this key's counters (merging them in would have made it
    /// mixed), so the key starts afresh. From a mixed summary the key gets
    /// the whole limit in each window its own counters could still count in:
    /// the current one if they could last to two windows after its start,
    /// the previous one if they could last to one.
    pub fn inherit(&self, expires_at: Micros, rule: &Rule, now: Micros) -> Option<Counters> {
        let (w, limit) = (rule.window_us(), rule.limit());
        if self.window_us == w {
            // The key's own counts were at most its limit.
            return Some(Counters {
                previous: self.counters.previous.min(limit),
                current: self.counters.current.min(limit),
                start: self.counters.start,
            });
        }
        if self.window_us != 0 {
            return None;
        }
        let start = now - now % w;
        if expires_at >= start + 2 * w {
            Some(Counters {
                previous: limit,
                current: limit,
                start,
            })
        } else if expires_at >= start + w {
            Some(Counters {
                previous: 0,
                current: limit,
                start: start.saturating_sub(w),
            })
        } else {
            None
        }
    }
}

#[derive(Clone, Copy)]
struct Estimate {
    w: u64,
    limit: u64,
    cost: u64,
}

impl Estimate {
    /// The requests counted at `elapsed` µs into the current window.
    fn weighted(&self, previous: u64, current: u64, elapsed: u64) -> f64 {
        previous as f64 * ((self.w - elapsed) as f64 / self.w as f64) + current as f64
    }

    fn passes(&self, previous: u64, current: u64, elapsed: u64) -> bool {
        self.weighted(previous, current, elapsed) + self.cost as f64 <= self.limit as f64
    }

    /// The exact wait until a denied request would pass.
    fn retry_after(&self, previous: u64, current: u64, start: Micros, now: Micros) -> u64 {
        if current + self.cost <= self.limit {
            // Passes later in this window, as the previous window's weight falls.
            let elapsed = now.saturating_sub(start);
            start + self.first_passing(previous, current, elapsed + 1) - now
        } else {
            // Passes in the next window, as this window's weight falls.
            start + self.w + self.first_passing(current, 0, 0) - now
        }
    }

    /// The first offset in `[from, w]` at which the request passes (at `w`
    /// it always does: only the current count is left). The linear
    /// estimate's solution is usually exact to a microsecond; from there
    /// the search gallops, then halves: a few evaluations, and never more
    /// than about 2·log2(w), even where the doubles cannot tell a
    /// microsecond's weight from none (a limit of 2^40 over a long window),
    /// where a step at a time would walk the whole window. The estimate
    /// only falls as the offset grows, so the first passing offset is one.
    fn first_passing(&self, previous: u64, current: u64, from: u64) -> u64 {
        let (w, slack) = (self.w as f64, (self.limit - current - self.cost) as f64);
        let guess = (w - slack * w / previous as f64).ceil();
        let guess = guess.min(w).max(from as f64) as u64;
        first_at_or_after(from, self.w, guess, |e| self.passes(previous, current, e))
    }
}

/// The first `e` in `[from, last]` for which `passes` holds, for a
/// `passes` that, once true, stays true and holds at `last`: galloping from
/// `guess` (in `[from, last]`) towards it, then halving what is left.
fn first_at_or_after(from: u64, last: u64, guess: u64, mut passes: impl FnMut(u64) -> bool) -> u64 {
    // The answer lies in [lo, hi], and `hi` passes.
    let (mut lo, mut hi) = (from, last);
    let mut step = 1u64;
    if passes(guess) {
        hi = guess;
        while hi > lo {
            let probe = hi.saturating_sub(step).max(lo);
            if !passes(probe) {
                lo = probe + 1;
                break;
            }
            hi = probe;
            step = step.saturating_mul(2);
        }
    } else {
        lo = guess + 1;
        while lo < hi {
            let probe = guess.saturating_add(step).min(hi);
            if passes(probe) {
                hi = probe;
                break;
            }
            lo = probe + 1;
            step = step.saturating_mul(2);
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if passes(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn counts_above_a_lowered_limit_deny_until_their_weight_falls() {
        let w = 1_000;
        let (pro, free) = (
            Rule::new(10, Duration::from_micros(w)).unwrap(),
            Rule::new(4, Duration::from_micros(w)).unwrap(),
        );
        let mut state = None;
        for _ in 0..8 {
            assert!(check(&mut state, &pro, 10_000, 1).allowed());
        }
        let denied = check(&mut state, &free, 10_500, 1);
        assert_eq!((denied.allowed(), denied.remaining()), (false, 0));
        // 8 in the current window: a request passes once 8 · (1 - e/w) + 1
        // <= 4, at e = 625 into the next window.
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(1_125)));
        assert!(!check(&mut state, &free, 11_624, 1).allowed());
        assert!(check(&mut state, &free, 11_625, 1).allowed());
    }

    #[test]
    fn the_previous_window_counts_by_its_overlap() {
        let rule = Rule::new(10, Duration::from_micros(1_000)).unwrap();
        let mut state = None;
        for _ in 0..10 {
            assert!(check(&mut state, &rule, 5_000, 1).allowed());
        }
        // At 6_250 the previous window weighs 0.75: 7.5 used, 2 more fit.
        let d = check(&mut state, &rule, 6_250, 2);
        assert!(d.allowed());
        assert_eq!(d.remaining(), 0);
        let denied = check(&mut state, &rule, 6_250, 1);
        // 10 * (1000 - e) / 1000 + 2 + 1 <= 10  <=>  e >= 300.
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(50)));
        assert!(!check(&mut state, &rule, 6_299, 1).allowed());
        assert!(check(&mut state, &rule, 6_300, 1).allowed());
    }

    #[test]
    fn a_full_window_waits_for_the_next_one() {
        let rule = Rule::new(4, Duration::from_micros(1_000)).unwrap();
        let mut state = None;
        assert!(check(&mut state, &rule, 2_100, 4).allowed());
        let denied = check(&mut state, &rule, 2_500, 1);
        // Next window: 4 * (1000 - e) / 1000 + 1 <= 4  <=>  e >= 250, at 3_250.
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(750)));
        assert_eq!(denied.reset_after(), Duration::from_micros(1_500));
        assert!(!check(&mut state, &rule, 3_249, 1).allowed());
        assert!(check(&mut state, &rule, 3_250, 1).allowed());
    }

    /// The first passing offset, a microsecond at a time.
    fn first_passing_by_scan(e: &Estimate, previous: u64, current: u64, from: u64) -> u64 {
        (from..e.w)
            .find(|&at| e.passes(previous, current, at))
            .unwrap_or(e.w.max(from))
    }

    proptest::proptest! {
        #[test]
        fn the_search_finds_the_offset_a_scan_finds(
            w in 1u64..3_000,
            limit in 1u64..60,
            cost_part in 0.0f64..1.0,
            current_part in 0.0f64..1.0,
            previous in 0u64..130,
            from_part in 0.0f64..1.0,
        ) {
            let cost = 1 + ((limit - 1) as f64 * cost_part) as u64;
            let current = ((limit - cost) as f64 * current_part) as u64;
            let from = (w as f64 * from_part) as u64;
            let e = Estimate { w, limit, cost };
            proptest::prop_assert_eq!(
                e.first_passing(previous, current, from),
                first_passing_by_scan(&e, previous, current, from)
            );
        }
    }

    #[test]
    fn a_limit_too_large_for_a_microseconds_weight_answers_what_a_scan_answers() {
        // At 2^50 a double cannot hold one request's weight spread over a
        // window's microseconds: the estimate is flat over most of the
        // window, where stepping from the guess walked up to `w` offsets
        // per check (a minute's 60 million, under the shard's lock, and in
        // Redis's one thread). The search answers what a scan answers
        // (how few evaluations it takes: the test below).
        let limit = 1u64 << 50;
        for w in [1_000_000u64, 3_000_000] {
            let rule = Rule::new(limit, Duration::from_micros(w)).unwrap();
            let mut state = None;
            let now = 10 * w + w / 3;
            let d = check(&mut state, &rule, now, 1);
            assert!(d.allowed());
            let more = Estimate {
                w,
                limit,
                cost: d.remaining() + 1,
            };
            // It passes in the next window, once its weight of this one's 1 fits.
            let start = now - now % w;
            let expected = start + w + first_passing_by_scan(&more, 1, 0, 0) - now;
            assert_eq!(
                d.rules()[0].available_after(),
                Duration::from_micros(expected)
            );
        }
    }

    #[test]
    fn the_search_evaluates_at_most_twice_the_windows_bits() {
        // A flat estimate over most of a minute's window, the answer far
        // from the guess on either side: a step at a time took millions of
        // evaluations; the search at most 2 · 26 + 1 (2^26 > 60 million).
        let w = 60_000_000;
        let answer = 52_500_001;
        for guess in [0, 1, answer - 1, answer, answer + 1, w - 1, w] {
            let mut evaluations = 0;
            let found = first_at_or_after(0, w, guess, |e| {
                evaluations += 1;
                e >= answer
            });
            assert_eq!(found, answer, "from guess {guess}");
            assert!(
                evaluations <= 53,
                "{evaluations} evaluations from guess {guess}"
            );
        }
        // The estimate's own guess, exact: two evaluations, as before.
        let mut evaluations = 0;
        first_at_or_after(0, w, answer, |e| {
            evaluations += 1;
            e >= answer
        });
        assert_eq!(evaluations, 2);
    }

    #[test]
    fn evicted_counters_know_their_window_and_merge_at_the_later_start() {
        let rule = Rule::new(10, Duration::from_micros(1_000)).unwrap();
        let (mut a, mut b) = (None, None);
        let da = check(&mut a, &rule, 5_100, 4);
        let db = check(&mut b, &rule, 4_900, 3);
        check(&mut b, &rule, 4_950, 6);
        let evicted_a = Evicted::new(a.unwrap(), 5_100 + da.reset_after().as_micros() as u64);
        let expires_b = 4_950 + 1_050;
        assert_eq!(db.reset_after(), Duration::from_micros(1_100));
        let evicted_b = Evicted::new(b.unwrap(), expires_b);
        assert_eq!((evicted_a.window_us, evicted_b.window_us), (1_000, 1_000));
        let mut merged = evicted_a;
        merged.merge(evicted_b);
        // b's window [4_000, 5_000) is the previous one at 5_000.
        let expected = Counters {
            previous: 9,
            current: 4,
            start: 5_000,
        };
        assert_eq!(merged.counters, expected);
        assert_eq!(merged.inherit(7_000, &rule, 5_200), Some(expected));
        let other = Rule::new(10, Duration::from_micros(500)).unwrap();
        assert_eq!(merged.inherit(7_000, &other, 5_200), None);
        // Windows of different lengths: the whole limit where it could count.
        let mut mixed = merged;
        mixed.merge(Evicted::new(
            Counters {
                previous: 0,
                current: 1,
                start: 5_000,
            },
            6_000,
        ));
        assert_eq!(mixed.window_us, 0);
        let full = |previous, start| Counters {
            previous,
            current: 10,
            start,
        };
        assert_eq!(mixed.inherit(7_000, &rule, 5_200), Some(full(10, 5_000)));
        assert_eq!(mixed.inherit(6_999, &rule, 5_200), Some(full(0, 4_000)));
        assert_eq!(mixed.inherit(5_999, &rule, 5_200), None);
    }
}
