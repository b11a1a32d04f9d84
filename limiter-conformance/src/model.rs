//! The reference model of every algorithm, written from the definitions
//! rather than from the stores' code (it shares nothing with the
//! algorithms the stores run): it keeps every allowed request (no
//! pruning), and finds "retry after" by searching for the first instant at
//! which the same request would pass, instead of solving for it.

use limiter_core::Decision;

use super::Params;

/// What a decision says, in plain numbers, for comparison: every field of
/// a [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// The deciding rule ([`Decision::rule_index`]).
    pub rule_index: usize,
    /// When denied, when the same request would pass, in µs.
    pub retry_after_us: Option<u64>,
    /// The pacing delay of an allowed request, in µs.
    pub delay_us: u64,
    /// Until every rule is clear, in µs.
    pub reset_after_us: u64,
    /// `(remaining, available after µs)` per rule.
    pub rules: Vec<(u64, u64)>,
}

impl Outcome {
    /// The numbers of `decision`.
    pub fn of(decision: &Decision) -> Self {
        let d = decision;
        Self {
            allowed: d.allowed(),
            rule_index: d.rule_index(),
            retry_after_us: d.retry_after().map(|r| r.as_micros() as u64),
            delay_us: d.delay().as_micros() as u64,
            reset_after_us: d.reset_after().as_micros() as u64,
            rules: d
                .rules()
                .iter()
                .map(|s| (s.remaining(), s.available_after().as_micros() as u64))
                .collect(),
        }
    }
}

/// One key's state in the reference model, and its decisions.
///
/// ```
/// use limiter_conformance::{KeyModel, Params};
///
/// let params = Params::FixedWindow(2, 1_000_000);
/// let mut key = KeyModel::default();
/// assert!(key.check(&params, 5_000_000, 2).allowed);
/// let denied = key.check(&params, 5_250_000, 1);
/// assert_eq!(denied.retry_after_us, Some(750_000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct KeyModel {
    log: Vec<u64>,
    window: Option<(u64, u64)>,        // (start, count)
    counters: Option<(u64, u64, u64)>, // (start, previous, current)
    /// (water in 1/period token units, updated, the (amount, period) it
    /// was written under).
    bucket: Option<(u128, u64, (u64, u64))>,
    /// GCRA's theoretical arrival time, in units of 1/amount µs: exact;
    /// when it was last moved, and the (amount, period) it was written under.
    tat: Option<(u128, u64, (u64, u64))>,
}

/// Water written under the rate `from` (amount, period), in 1/period units,
/// read under `to` (amount, period, capacity), as the policies' definition
/// says: under the same sub-unit (`period / gcd(amount, period)`, one token)
/// the same water; under another the same number of tokens, a partial one
/// counted whole; never more than the bucket holds.
fn carried(water: u128, from: (u64, u64), to: (u64, u64, u64)) -> u128 {
    let unit = |(amount, period): (u64, u64)| period / gcd(amount, period);
    let (amount, period, capacity) = to;
    let carried = if unit(from) == unit((amount, period)) {
        water * period as u128 / from.1 as u128
    } else {
        water.div_ceil(from.1 as u128) * period as u128
    };
    carried.min(capacity as u128 * period as u128)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl KeyModel {
    /// Decides a request of `cost` at `now` (µs since the Unix epoch) under
    /// `params`, and records it if allowed. Time only moves forward: `now`
    /// is never earlier than the last check's. A key's parameters may
    /// change between checks (a plan changed at run time) within one
    /// algorithm: the state is read under the new ones as the policies
    /// define.
    pub fn check(&mut self, params: &Params, now: u64, cost: u64) -> Outcome {
        // The log keeps what the policy checked now can count: entries in
        // its longest window (a policy with a longer one sees no older ones).
        if let Params::SlidingLog(ref rules) = *params {
            let longest = rules.iter().map(|r| r.1).max().unwrap();
            if let Some(expired_before) = now.checked_sub(longest) {
                self.log.retain(|&e| e > expired_before);
            }
        }
        let allowed = self.passes(params, now, cost);
        // Per rule: the first instant it alone would pass (for the deciding rule).
        let rule_count = match params {
            Params::SlidingLog(rules) => rules.len(),
            _ => 1,
        };
        let mut retry_after_us = None;
        let mut rule_index = 0;
        if !allowed {
            let mut longest = 0;
            for i in 0..rule_count {
                if !self.rule_passes(params, i, now, cost) {
                    let wait = first_passing(|t| self.rule_passes(params, i, t, cost), now);
                    if wait > longest {
                        longest = wait;
                        rule_index = i;
                    }
                }
            }
            retry_after_us = Some(first_passing(|t| self.passes(params, t, cost), now));
        }
        let delay_us = if allowed {
            self.record(params, now, cost)
        } else {
            0
        };
        let statuses: Vec<(u64, u64)> = (0..rule_count)
            .map(|i| self.status(params, i, now))
            .collect();
        let reset_after_us = statuses.iter().map(|s| s.1).max().unwrap();
        // When each rule makes more quota available: a rule that denies the
        // request when it would let it pass; any other when it would let
        // one request more than it has remaining pass (never, if nothing is
        // used: 0).
        let rules: Vec<(u64, u64)> = statuses
            .iter()
            .enumerate()
            .map(|(i, &(remaining, _))| {
                let available = if !allowed && !self.rule_passes(params, i, now, cost) {
                    first_passing(|t| self.rule_passes(params, i, t, cost), now)
                } else if remaining == limit_of(params, i) {
                    0
                } else {
                    first_passing(|t| self.rule_passes(params, i, t, remaining + 1), now)
                };
                (remaining, available)
            })
            .collect();
        if allowed {
            let fewest = rules.iter().map(|r| r.0).min().unwrap();
            rule_index = rules.iter().position(|r| r.0 == fewest).unwrap();
        }
        Outcome {
            allowed,
            rule_index,
            retry_after_us,
            delay_us,
            reset_after_us,
            rules,
        }
    }

    fn passes(&self, params: &Params, t: u64, cost: u64) -> bool {
        let rules = match params {
            Params::SlidingLog(rules) => rules.len(),
            _ => 1,
        };
        (0..rules).all(|i| self.rule_passes(params, i, t, cost))
    }

    /// Whether rule `i` alone lets a request of `cost` pass at `t`, if nothing
    /// else happens before `t`.
    fn rule_passes(&self, params: &Params, i: usize, t: u64, cost: u64) -> bool {
        match *params {
            Params::SlidingLog(ref rules) => {
                let (limit, window) = rules[i];
                self.in_window(t, window) + cost <= limit
            }
            Params::FixedWindow(limit, window) => match self.window {
                Some((start, count)) if t < start + window => count + cost <= limit,
                _ => true,
            },
            Params::SlidingWindow(limit, window) => {
                self.weighted(window, t) + cost as f64 <= limit as f64
            }
            Params::Bucket(_, period, capacity, _) => {
                self.water(params, t) + (cost * period) as u128 <= (capacity * period) as u128
            }
            Params::Gcra(amount, period, burst) => {
                let at = t as u128 * amount as u128;
                self.tat_under(params).unwrap_or(at).max(at) + (cost * period) as u128
                    <= at + (burst * period) as u128
            }
        }
    }

    /// GCRA's TAT read under `params` (see [`carried`]), converted at the
    /// time it was last moved.
    fn tat_under(&self, params: &Params) -> Option<u128> {
        let Params::Gcra(amount, period, burst) = *params else {
            unreachable!()
        };
        let (tat, moved, from) = self.tat?;
        let water = tat - moved as u128 * from.0 as u128;
        let water = carried(water, from, (amount, period, burst));
        Some(moved as u128 * amount as u128 + water)
    }

    /// Gives back a request of `cost` recorded at `at` (see
    /// [`KeyState::refund`](limiter_core::KeyState::refund)), as the definition of counting by
    /// outcome says: the log loses `cost` of its entries at `at`; a window
    /// counter loses `cost` from the window that counted the request, if
    /// that window is still the current one (fixed) or one of the two it
    /// weighs (sliding), its start unchanged. The buckets and GCRA give
    /// nothing back.
    pub fn refund(&mut self, params: &Params, at: u64, cost: u64) {
        match *params {
            Params::SlidingLog(_) => {
                let mut left = cost;
                self.log.retain(|&e| {
                    let give_back = e == at && left > 0;
                    left -= u64::from(give_back);
                    !give_back
                });
            }
            Params::FixedWindow(_, window) => {
                if let Some((start, count)) = self.window.as_mut()
                    && *start <= at
                    && at < *start + window
                {
                    *count = count.saturating_sub(cost);
                }
            }
            Params::SlidingWindow(_, window) => {
                if let Some((start, previous, current)) = self.counters.as_mut() {
                    let counted_in = at / window * window;
                    if *start == counted_in {
                        *current = current.saturating_sub(cost);
                    } else if *start == counted_in + window {
                        *previous = previous.saturating_sub(cost);
                    }
                }
            }
            Params::Bucket(..) | Params::Gcra(..) => {}
        }
    }

    /// Entries after `t - window`, later ones included (they exist only when
    /// clocks disagree, and count so the limit stays exact).
    fn in_window(&self, t: u64, window: u64) -> u64 {
        self.log.iter().filter(|&&e| e + window > t).count() as u64
    }

    /// The sliding window's estimate at `t`.
    fn weighted(&self, window: u64, t: u64) -> f64 {
        let (start, previous, current) = self.windows_at(window, t);
        let elapsed = t.saturating_sub(start);
        previous as f64 * ((window - elapsed) as f64 / window as f64) + current as f64
    }

    /// The current window's start and the (previous, current) counts at `t`;
    /// a stored window later than `t`'s (clocks disagree) stays current.
    fn windows_at(&self, window: u64, t: u64) -> (u64, u64, u64) {
        let start = t - t % window;
        match self.counters {
            Some((s, p, c)) if s >= start => (s, p, c),
            Some((s, _, c)) if s + window == start => (start, c, 0),
            _ => (start, 0, 0),
        }
    }

    /// The bucket's water at `t` under `params`, in 1/period token units;
    /// it drains `amount` per µs.
    fn water(&self, params: &Params, t: u64) -> u128 {
        let Params::Bucket(amount, period, capacity, _) = *params else {
            unreachable!()
        };
        match self.bucket {
            Some((water, updated, from)) => {
                let water = carried(water, from, (amount, period, capacity));
                let drained = t.saturating_sub(updated) as u128 * amount as u128;
                water.saturating_sub(drained)
            }
            None => 0,
        }
    }

    /// Records an allowed request; returns the pacing delay.
    fn record(&mut self, params: &Params, now: u64, cost: u64) -> u64 {
        match *params {
            Params::SlidingLog(_) => {
                self.log.extend(std::iter::repeat_n(now, cost as usize));
                0
            }
            Params::FixedWindow(_, window) => {
                self.window = match self.window {
                    Some((start, count)) if now < start + window => Some((start, count + cost)),
                    _ => Some((now, cost)),
                };
                0
            }
            Params::SlidingWindow(_, window) => {
                let (start, previous, current) = self.windows_at(window, now);
                self.counters = Some((start, previous, current + cost));
                0
            }
            Params::Bucket(amount, period, _, pacing) => {
                let water = self.water(params, now);
                let updated = self.bucket.map_or(now, |(_, u, _)| u.max(now));
                self.bucket = Some((water + (cost * period) as u128, updated, (amount, period)));
                if pacing {
                    water.div_ceil(amount as u128) as u64
                } else {
                    0
                }
            }
            Params::Gcra(amount, period, _) => {
                let at = now as u128 * amount as u128;
                let tat = self.tat_under(params).unwrap_or(at).max(at) + (cost * period) as u128;
                let moved = self.tat.map_or(now, |(_, m, _)| m.max(now));
                self.tat = Some((tat, moved, (amount, period)));
                0
            }
        }
    }

    /// (remaining, reset after) of rule `i` at `now`; the decision's reset is
    /// the latest of its rules'.
    fn status(&self, params: &Params, i: usize, now: u64) -> (u64, u64) {
        match *params {
            Params::SlidingLog(ref rules) => {
                let (limit, window) = rules[i];
                let newest = self.log.iter().filter(|&&e| e + window > now).max();
                (
                    limit.saturating_sub(self.in_window(now, window)),
                    newest.map_or(0, |e| e + window - now),
                )
            }
            Params::FixedWindow(limit, window) => match self.window {
                Some((start, count)) if now < start + window => {
                    (limit.saturating_sub(count), start + window - now)
                }
                _ => unreachable!("read after recording, or when denied inside a live window"),
            },
            Params::SlidingWindow(limit, window) => {
                let (start, previous, current) = self.windows_at(window, now);
                let reset = if current > 0 {
                    start + 2 * window - now
                } else if previous > 0 {
                    start + window - now
                } else {
                    0
                };
                let remaining = (limit as f64 - self.weighted(window, now)).max(0.0).floor() as u64;
                (remaining, reset)
            }
            Params::Bucket(amount, period, capacity, _) => {
                let water = self.water(params, now);
                (
                    ((capacity * period) as u128 - water) as u64 / period,
                    water.div_ceil(amount as u128) as u64,
                )
            }
            Params::Gcra(amount, period, burst) => {
                let at = now as u128 * amount as u128;
                let ttl = self.tat_under(params).unwrap_or(at).max(at) - at;
                (
                    ((burst * period) as u128 - ttl) as u64 / period,
                    ttl.div_ceil(amount as u128) as u64,
                )
            }
        }
    }
}

/// The quota of rule `i`: its limit, the bucket's capacity, GCRA's burst.
fn limit_of(params: &Params, i: usize) -> u64 {
    match *params {
        Params::SlidingLog(ref rules) => rules[i].0,
        Params::FixedWindow(limit, _) | Params::SlidingWindow(limit, _) => limit,
        Params::Bucket(_, _, capacity, _) | Params::Gcra(_, _, capacity) => capacity,
    }
}

/// The smallest `d > 0` with `passes(now + d)`, for a `passes` that, once
/// true, stays true (state only decays while nothing is recorded).
fn first_passing(passes: impl Fn(u64) -> bool, now: u64) -> u64 {
    let mut high = 1;
    while !passes(now + high) {
        high *= 2;
    }
    let mut low = high / 2; // fails (or is 0, which is "now": known to fail)
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if passes(now + mid) {
            high = mid
        } else {
            low = mid
        }
    }
    high
}
