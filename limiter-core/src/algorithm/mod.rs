//! The algorithms as pure functions of (parameters, state, now, cost).
//!
//! Nothing here reads a clock or touches a store: the memory store keeps the
//! state in its shards, and the Redis store runs the same arithmetic in the Lua
//! scripts beside it. Times are microseconds; every quantity is an integer
//! below 2^53 (the sliding window's weights are IEEE doubles, computed in the
//! same order in both places), so both stores decide identically.

pub(crate) mod bucket;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;

/// Microseconds since the Unix epoch.
pub type Micros = u64;
