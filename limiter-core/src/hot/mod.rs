//! Hot keys: ways to take load off the one Redis thread that owns a busy
//! key, each opted into per policy (see [`HotKey`]).
//!
//! - [`lease`](crate::Policy::with_lease): an instance takes a batch of
//!   permits in one call and hands them out locally. Exact.
//! - [`shards`](crate::Policy::with_shards): the key splits into sub-keys on
//!   different cluster nodes. Never above the limit; may deny early.
//! - [`sampling`](crate::Policy::with_sampling): one request in `k` is
//!   checked, weighing `k`. Up to `k - 1` extra per instance and window.
//!
//! The modes are properties of the [`Policy`](crate::Policy): the
//! [`Limiter`](crate::Limiter), the Tower layer and `#[rate_limit]` honour
//! them through [`HotKeys`], a store that wraps theirs and keeps the
//! per-instance state the modes need.

pub use limiter_model::hot::{
    DEFAULT_LEASE_TTL, HotKey, Lease, MAX_LEASE, MAX_LEASE_TTL, MAX_SAMPLING, MAX_SHARDS,
};

mod engine;
mod grant;
mod lease;
mod sample;
mod shard;
mod state;

pub use engine::HotKeys;

/// `store`'s check, saying who decided (see [`Verdict::of`](crate::Verdict::of)).
async fn verdict_of<S: crate::Store>(
    store: &S,
    key: &crate::Key,
    policy: &crate::Policy,
    cost: u64,
) -> Result<crate::Verdict, crate::Error> {
    crate::Verdict::of(store.check(key, policy, cost).await)
}
pub use grant::{LeaseGrant, LeaseRequest};
pub use shard::{shard_key, slot};
