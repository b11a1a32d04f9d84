//! Random policies of every algorithm, shared by the differential tests.

use limiter_conformance::Params;
use proptest::prelude::*;

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

/// Steps that land on a window's edge: exactly one of the policy's windows
/// (or its period), or 1 µs less or more. After a step that recorded a
/// request, such a step puts it exactly where a bound off by 1 µs decides
/// otherwise.
pub(crate) fn edge(params: &Params) -> impl Strategy<Value = u64> + use<> {
    let spans: Vec<u64> = match params {
        Params::SlidingLog(rules) => rules.iter().map(|rule| rule.1).collect(),
        other => vec![other.span_us()],
    };
    (prop::sample::select(spans), -1i64..=1).prop_map(|(span, off)| span.saturating_add_signed(off))
}
