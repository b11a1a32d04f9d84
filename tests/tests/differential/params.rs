//! Random policies of every algorithm, shared by the differential tests.

use std::time::Duration;

use limiter_core::{Policy, Rate, Rule};
use proptest::prelude::*;

use crate::model::Params;

/// Windows and periods: short and long ones, and a few shared values so that
/// rules tie (and tie-breaking is compared too).
pub(crate) fn window() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 1u64..2_000,
        2 => 1_000u64..3_000_000,
        2 => prop::sample::select(vec![500u64, 1_000, 2_000, 60_000]),
    ]
}

pub(crate) fn params() -> impl Strategy<Value = Params> {
    prop_oneof![
        prop::collection::vec((1u64..7, window()), 1..4).prop_map(Params::SlidingLog),
        // Larger limits: longer logs.
        prop::collection::vec((65u64..80, window()), 1..3).prop_map(Params::SlidingLog),
        (1u64..7, window()).prop_map(|(l, w)| Params::FixedWindow(l, w)),
        (1u64..9, window()).prop_map(|(l, w)| Params::SlidingWindow(l, w)),
        (1u64..11, window(), 1u64..7, any::<bool>())
            .prop_map(|(a, p, c, pacing)| Params::Bucket(a, p, c, pacing)),
        (1u64..11, window(), 1u64..7).prop_map(|(a, p, b)| Params::Gcra(a, p, b)),
    ]
}

pub(crate) fn policy(params: &Params) -> Policy {
    let us = Duration::from_micros;
    match *params {
        Params::SlidingLog(ref rules) => {
            Policy::sliding_log(rules.iter().map(|&(l, w)| Rule::new(l, us(w)).unwrap())).unwrap()
        }
        Params::FixedWindow(l, w) => Policy::fixed_window(Rule::new(l, us(w)).unwrap()),
        Params::SlidingWindow(l, w) => Policy::sliding_window(Rule::new(l, us(w)).unwrap()),
        Params::Bucket(a, p, c, false) => {
            Policy::token_bucket(Rate::new(a, us(p)).unwrap(), c).unwrap()
        }
        Params::Bucket(a, p, c, true) => {
            Policy::leaky_bucket(Rate::new(a, us(p)).unwrap(), c).unwrap()
        }
        Params::Gcra(a, p, b) => Policy::gcra(Rate::new(a, us(p)).unwrap(), b).unwrap(),
    }
}

/// The largest cost every part of the policy can hold.
pub(crate) fn max_cost(params: &Params) -> u64 {
    match *params {
        Params::SlidingLog(ref rules) => rules.iter().map(|r| r.0).min().unwrap(),
        Params::FixedWindow(l, _) | Params::SlidingWindow(l, _) => l,
        Params::Bucket(_, _, c, _) | Params::Gcra(_, _, c) => c,
    }
}
