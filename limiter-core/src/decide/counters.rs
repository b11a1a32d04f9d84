//! The pipeline's metrics: a limit's `limiter_decisions_total` and
//! `limiter_shadow_denied_total` counters, shared by its rate check and its
//! concurrency limit.

use std::sync::OnceLock;

use crate::Verdict;

/// How a request was decided, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The store allowed it.
    StoreAllowed,
    /// The store denied it.
    StoreDenied,
    /// The guard's deny cache denied it, without a store call.
    CacheDenied,
    /// The store failed; the in-memory fallback allowed it.
    FallbackAllowed,
    /// The store failed; the in-memory fallback denied it.
    FallbackDenied,
    /// The store failed; the failure policy let it through.
    FailedOpen,
    /// The store failed; the failure policy refused it.
    FailedClosed,
    /// A verdict of another kind.
    Other,
    /// The store failed, and no failure policy decided.
    Error,
    /// On an allow list: not checked.
    Bypassed,
    /// A plan without limits: not checked.
    UnlimitedPlan,
    /// A cost no request could ever pay.
    CostRefused,
    /// The identity is blocked.
    Blocked,
    /// The client or identity is on a deny list.
    DenyListed,
    /// A live override switched the limit off: not checked.
    OverrideOff,
}

/// The labels of each [`Counted`], in its order.
const LABELS: [(&str, &str); 15] = [
    ("allowed", "store"),
    ("denied", "store"),
    ("denied", "deny_cache"),
    ("allowed", "fallback"),
    ("denied", "fallback"),
    ("allowed", "fail_open"),
    ("refused", "fail_closed"),
    ("other", "other"),
    ("error", "error"),
    ("bypassed", "allow_list"),
    ("allowed", "unlimited_plan"),
    ("denied", "cost"),
    ("denied", "blocked"),
    ("denied", "deny_list"),
    ("bypassed", "override_off"),
];

impl Counted {
    /// A decision of a store used as it is.
    #[inline]
    pub fn by_store(decision: &crate::Decision) -> Self {
        if decision.allowed() {
            Self::StoreAllowed
        } else {
            Self::StoreDenied
        }
    }

    /// A verdict, as counted.
    pub fn of(verdict: &Verdict) -> Self {
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
/// build labels: by the compiled limit, then under a live override.
#[derive(Debug, Clone, Default)]
pub struct DecisionCounters {
    counters: [[OnceLock<metrics::Counter>; LABELS.len()]; 2],
}

impl DecisionCounters {
    /// Counts one decision of the limit `limit`, by `algorithm` (the name
    /// is read only when the counter is registered), `overridden` when a
    /// live override decided it.
    #[inline]
    pub fn record(
        &self,
        counted: Counted,
        algorithm: impl FnOnce() -> &'static str,
        limit: &str,
        overridden: bool,
    ) {
        let index = counted as usize;
        self.counters[usize::from(overridden)][index]
            .get_or_init(|| {
                let (outcome, source) = LABELS[index];
                metrics::counter!(
                    "limiter_decisions_total",
                    "outcome" => outcome,
                    "source" => source,
                    "algorithm" => algorithm(),
                    "limit" => limit.to_owned(),
                    "override" => if overridden { "true" } else { "false" },
                )
            })
            .increment(1);
    }
}

/// One limit's `limiter_shadow_denied_total`: the requests shadow mode let
/// through that the limit denied.
#[derive(Debug, Clone, Default)]
pub struct ShadowCounter(OnceLock<metrics::Counter>);

impl ShadowCounter {
    /// Counts one denial shadow mode let through.
    pub fn record(&self, algorithm: &'static str, limit: &str) {
        self.0
            .get_or_init(|| {
                metrics::counter!(
                    "limiter_shadow_denied_total",
                    "algorithm" => algorithm,
                    "limit" => limit.to_owned(),
                )
            })
            .increment(1);
    }
}
