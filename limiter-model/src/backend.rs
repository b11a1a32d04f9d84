//! What a store crate builds on: a policy's exact parameters and the parts
//! of the algorithms a store that runs them elsewhere (in Lua, in SQL)
//! shares with the memory store, so that its decisions are the memory
//! store's for identical times (see `limiter_core::backend`, which adds
//! the answers of concurrency limits and leases).

pub use crate::algorithm::Micros;
pub use crate::policy::{BucketParams, Kind};

/// The sliding log's shared parts.
pub mod sliding_log {
    pub use crate::algorithm::sliding_log::{decide, longest_window_us};
}

/// The fixed window's state and check.
pub mod fixed_window {
    pub use crate::algorithm::fixed_window::{Window, check};
}

/// The meter of the token bucket, the leaky bucket and GCRA: its state and
/// check.
pub mod meter {
    pub use crate::algorithm::bucket::{Level, Pacing, check};
}

/// The sliding window counter's state and check.
pub mod sliding_window {
    pub use crate::algorithm::sliding_window::{Counters, check};
}
