//! The algorithms as pure functions of (parameters, state, now, cost).
//!
//! Nothing here reads a clock or touches a store: the memory store keeps the
//! state in its shards, and the Redis store runs the same arithmetic in the Lua
//! scripts beside it. Times are microseconds; every quantity is an integer
//! below 2^53 (the sliding window's weights are IEEE doubles, computed in the
//! same order in both places), so both stores decide identically.

pub mod bucket;
pub mod fixed_window;
pub mod gcra;
pub mod sliding_log;
pub mod sliding_window;

/// Microseconds since the Unix epoch.
pub type Micros = u64;
