//! The failure policy a caller chooses ([`OnStoreError`]): what to decide
//! when the store cannot answer in time.

/// What to decide when the store cannot answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnStoreError {
    /// Decide with a local in-memory limiter applying the same policy, each
    /// limit divided by `instances` (the number of instances sharing the
    /// store), so together they stay near the shared limit. The default, with
    /// `instances: 1`.
    Fallback {
        /// The number of instances sharing the store (at least 1).
        instances: u32,
    },
    /// Let the request through.
    FailOpen,
    /// Refuse the request (the HTTP layer answers 503 with `Retry-After`).
    FailClosed,
}

impl Default for OnStoreError {
    fn default() -> Self {
        Self::Fallback { instances: 1 }
    }
}

impl OnStoreError {
    /// The name used in metrics and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Fallback { .. } => "fallback",
            Self::FailOpen => "fail_open",
            Self::FailClosed => "fail_closed",
        }
    }
}
