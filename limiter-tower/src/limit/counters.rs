//! A route's `limiter_decisions_total` counters.

use std::sync::OnceLock;

use limiter_core::{Algorithm, Verdict};

/// How a request was decided, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    StoreAllowed,
    StoreDenied,
    CacheDenied,
    FallbackAllowed,
    FallbackDenied,
    FailedOpen,
    FailedClosed,
    Other,
    Error,
}

/// The labels of each [`Counted`], in its order.
const LABELS: [(&str, &str); 9] = [
    ("allowed", "store"),
    ("denied", "store"),
    ("denied", "deny_cache"),
    ("allowed", "fallback"),
    ("denied", "fallback"),
    ("allowed", "fail_open"),
    ("refused", "fail_closed"),
    ("other", "other"),
    ("error", "error"),
];

impl Counted {
    /// A decision of a store used as it is.
    pub(crate) fn by_store(decision: &limiter_core::Decision) -> Self {
        if decision.allowed() {
            Self::StoreAllowed
        } else {
            Self::StoreDenied
        }
    }

    pub(crate) fn of(verdict: &Verdict) -> Self {
        match verdict {
            Verdict::Store(d) if d.allowed() => Self::StoreAllowed,
            Verdict::Store(_) => Self::StoreDenied,
            Verdict::Cached(_) => Self::CacheDenied,
            Verdict::Fallback(d) if d.allowed() => Self::FallbackAllowed,
            Verdict::Fallback(_) => Self::FallbackDenied,
            Verdict::FailedOpen => Self::FailedOpen,
            Verdict::FailedClosed { .. } => Self::FailedClosed,
            _ => Self::Other,
        }
    }
}

/// One route's counters, registered on first use so a request does not
/// build labels.
#[derive(Debug, Clone, Default)]
pub(crate) struct DecisionCounters {
    counters: [OnceLock<metrics::Counter>; LABELS.len()],
}

impl DecisionCounters {
    /// Counts one decision of the limit `limit`.
    #[inline]
    pub(crate) fn record(&self, counted: Counted, algorithm: Algorithm, limit: &str) {
        let index = counted as usize;
        self.counters[index]
            .get_or_init(|| {
                let (outcome, source) = LABELS[index];
                metrics::counter!(
                    "limiter_decisions_total",
                    "outcome" => outcome,
                    "source" => source,
                    "algorithm" => algorithm.name(),
                    "limit" => limit.to_owned(),
                )
            })
            .increment(1);
    }
}
