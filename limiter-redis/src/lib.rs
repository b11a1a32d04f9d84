//! The Redis store for limiter: rate-limit state shared by every instance
//! of a service, on a standalone Redis (at a URL or behind Redis Sentinel)
//! or a Redis Cluster, and on Valkey alike.
//!
//! ```no_run
//! use limiter_core::Limiter;
//! use limiter_redis::RedisStore;
//!
//! # async fn run() -> Result<(), limiter_core::Error> {
//! let limiter = Limiter::new(RedisStore::connect("redis://127.0.0.1:6379/").await?);
//! # Ok(()) }
//! ```
//!
//! Each algorithm is one Lua script (in `scripts/`, sharing `prelude.lua`;
//! all but the sliding log also share `helpers.lua`) that touches one key,
//! so a check is one atomic round trip and, on a
//! cluster, runs on the node owning that key's slot. Scripts are sent by SHA1
//! (EVALSHA) and loaded only when the server answers NOSCRIPT, which means
//! the call did not run. No call that may have executed is ever sent again.
//! Checks of a hot key are coalesced: one call of a batch script (the
//! algorithm's own step, in a loop) decides the checks that queued while
//! the key's previous call was in flight (`coalesce.rs`, `batch.rs`).
//!
//! Applications use [`RedisStore`] and [`RedisConfig`]; in an axum service,
//! through `limiter-tower`'s `redis` feature. [`connection`] and [`lua`]
//! are the building blocks a store built on this one uses (the regional
//! store does): connections held and made again one way, and scripts sent
//! by SHA1.
//!
//! # Feature flags
//! - `test-util`: lets the store take the timestamp from the caller, so
//!   tests can compare it with the memory store on the same times.

mod announce;
mod announcer;
mod batch;
mod blocks;
mod capabilities;
mod check;
mod cluster;
mod coalesce;
mod config;
mod lease;
mod link;
pub mod lua;
mod multiplexed;
mod node_batch;
mod notice;
mod overrides;
mod permits;
mod primary;
mod queue;
mod reconcile;
mod refund;
mod replica;
mod scripts;
mod sentinel;
mod slots;
mod store;
mod subscription;

/// Connections to Redis held and made again one way: a connection the
/// server closed is never handed out, a fresh one is made first, within
/// the caller's deadline.
pub mod connection {
    pub use crate::link::{Link, Live};
    pub use crate::multiplexed::Multiplexed;
}

pub use config::{DEFAULT_CONNECTION_TIMEOUT, RedisConfig};
pub use store::RedisStore;

use limiter_core::Error;

/// A Redis error as the store answers it: a store error of kind `oom` when
/// Redis refused the call for want of memory (nothing ran), else `redis`.
pub fn redis_error(error: redis::RedisError) -> Error {
    let kind = if error.code() == Some("OOM") {
        "oom"
    } else {
        "redis"
    };
    Error::Backend(limiter_core::BackendError::new(kind, error))
}

/// Every `.lua` file of this crate, by name (`prelude.lua`, ...), with its
/// text: for tests that have Redis compile each on its own, or join some
/// into a script of their own (`test-util`).
#[cfg(feature = "test-util")]
pub fn lua_files() -> &'static [(&'static str, &'static str)] {
    scripts::FILES
}

/// Every script this crate sends, by a name (`fixed_window peek`,
/// `concurrency`, ...): for tests that have Redis compile each
/// (`test-util`).
#[cfg(feature = "test-util")]
pub fn lua_scripts() -> Vec<(String, &'static lua::Lua)> {
    scripts::all()
}
