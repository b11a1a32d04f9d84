//! The reference model's parameters: one algorithm and its numbers, from
//! which the suite builds the [`Policy`] a store is checked with.

use std::time::Duration;

use limiter_core::{Algorithm, Policy, Rate, Rule};

/// An algorithm and its parameters, in microseconds, as the reference model
/// ([`KeyModel`](super::KeyModel)) reads them. [`policy`](Self::policy)
/// builds the same policy through the public constructors, so the model and
/// the store under test are given the same numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Params {
    /// The sliding log: `(limit, window µs)` per rule, all checked together.
    SlidingLog(Vec<(u64, u64)>),
    /// The fixed window: `(limit, window µs)`; a window starts at a key's
    /// first request.
    FixedWindow(u64, u64),
    /// The sliding window counter: `(limit, window µs)`; windows aligned to
    /// multiples of the window.
    SlidingWindow(u64, u64),
    /// A bucket: `(amount, period µs, capacity, pacing)`, draining (or
    /// refilling) `amount` tokens per period; with `pacing` a leaky bucket
    /// (an allowed request answers a delay), without a token bucket.
    Bucket(u64, u64, u64, bool),
    /// GCRA: `(amount, period µs, burst)`.
    Gcra(u64, u64, u64),
}

impl Params {
    /// The policy these parameters describe.
    ///
    /// # Panics
    /// When the numbers make no valid policy (a zero limit, window, rate or
    /// capacity, more rules than a policy holds, or a bucket too large to
    /// compute exactly).
    pub fn policy(&self) -> Policy {
        let us = Duration::from_micros;
        let built = match *self {
            Self::SlidingLog(ref rules) => {
                let rules: Result<Vec<Rule>, _> =
                    rules.iter().map(|&(l, w)| Rule::new(l, us(w))).collect();
                rules.and_then(Policy::sliding_log)
            }
            Self::FixedWindow(l, w) => Rule::new(l, us(w)).map(Policy::fixed_window),
            Self::SlidingWindow(l, w) => Rule::new(l, us(w)).map(Policy::sliding_window),
            Self::Bucket(a, p, c, false) => {
                Rate::new(a, us(p)).and_then(|rate| Policy::token_bucket(rate, c))
            }
            Self::Bucket(a, p, c, true) => {
                Rate::new(a, us(p)).and_then(|rate| Policy::leaky_bucket(rate, c))
            }
            Self::Gcra(a, p, b) => Rate::new(a, us(p)).and_then(|rate| Policy::gcra(rate, b)),
        };
        built.unwrap_or_else(|e| panic!("{self:?} is no valid policy: {e}"))
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::SlidingLog(_) => Algorithm::SlidingLog,
            Self::FixedWindow(..) => Algorithm::FixedWindow,
            Self::SlidingWindow(..) => Algorithm::SlidingWindow,
            Self::Bucket(.., false) => Algorithm::TokenBucket,
            Self::Bucket(.., true) => Algorithm::LeakyBucket,
            Self::Gcra(..) => Algorithm::Gcra,
        }
    }

    /// The largest cost every part of the policy can hold: the tightest
    /// rule's limit, the capacity, the burst.
    pub fn max_cost(&self) -> u64 {
        match *self {
            Self::SlidingLog(ref rules) => rules.iter().map(|r| r.0).min().unwrap_or(0),
            Self::FixedWindow(l, _) | Self::SlidingWindow(l, _) => l,
            Self::Bucket(_, _, c, _) | Self::Gcra(_, _, c) => c,
        }
    }

    /// The time scale of the policy, in µs: its longest window, or the
    /// period of its rate.
    pub fn span_us(&self) -> u64 {
        match *self {
            Self::SlidingLog(ref rules) => rules.iter().map(|r| r.1).max().unwrap_or(0),
            Self::FixedWindow(_, w) | Self::SlidingWindow(_, w) => w,
            Self::Bucket(_, p, _, _) | Self::Gcra(_, p, _) => p,
        }
    }

    /// How long after its last admitted request a key's state can no
    /// longer deny anything, in µs: the longest window (a fixed window
    /// started at or before that request); two windows for the sliding
    /// window counter (the previous window weighs on the current one); the
    /// time to drain a full bucket.
    pub fn clear_after_us(&self) -> u64 {
        match *self {
            Self::SlidingLog(_) | Self::FixedWindow(..) => self.span_us(),
            Self::SlidingWindow(_, w) => 2 * w,
            Self::Bucket(a, p, c, _) | Self::Gcra(a, p, c) => (c * p).div_ceil(a),
        }
    }
}
