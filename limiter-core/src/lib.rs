//! Exact rate limiting, shared through Redis or kept in memory.
//!
//! `limiter-core` holds the rules and policies, the algorithms, the [`Store`]
//! trait with the in-memory store, and the programmatic API, [`Limiter`]. The Tower
//! layer and the `#[rate_limit]` macro for axum live in `limiter-tower`.
//!
//! ```
//! use std::time::Duration;
//! use limiter_core::{Limiter, MemoryStore, Policy, Rule};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let limiter = Limiter::new(MemoryStore::new()); // or limiter_redis::RedisStore
//! let policy = Policy::sliding_log([
//!     Rule::new(10, Duration::from_secs(60))?,
//!     Rule::new(20, Duration::from_secs(120))?,
//! ])?;
//! for _ in 0..10 {
//!     assert!(limiter.check("203.0.113.7:posts", &policy).await?.allowed());
//! }
//! let denied = limiter.check("203.0.113.7:posts", &policy).await?;
//! assert!(!denied.allowed());
//! assert_eq!(denied.rule().to_string(), "10-per-60s");
//! assert!(denied.retry_after().unwrap() <= Duration::from_secs(60));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Algorithms
//! Every algorithm runs on both stores with identical decisions for identical
//! timestamps; see [`Policy`] for their semantics.
//!
//! # Time
//! The Redis store reads the Redis server's clock inside its scripts, so
//! application instances with skewed clocks still agree. The memory store
//! reads an injected [`Clock`]; tests use [`ManualClock`].
//!
//! # Feature flags
//! - `runtime` (default): everything that checks requests: the [`Store`]
//!   trait, [`MemoryStore`], [`Limiter`], the failure policy, clocks and key
//!   building. Without it only the rules, rates, policies, decisions and
//!   errors compile, free of dependencies (what `#[rate_limit]` checks its
//!   arguments with when it compiles).
//! - `test-util`: test helpers for stores built on this crate (the hot-key
//!   engine on a clock driven by hand).
//! - `conformance`: the store conformance suite ([`conformance`]), which
//!   any [`Store`] runs to show that it decides as the policies define; for
//!   a store's tests.
//!
//! # Stores
//! [`MemoryStore`] is here; the Redis store is the crate `limiter-redis`,
//! the regional store `limiter-regional`. A store of one's own implements
//! [`Store`] with the parts in [`backend`], and runs [`conformance`].

// Without `runtime`, the parts only the stores read (the decision's
// constructors, the policy's exact parameters) have no reader.
#![cfg_attr(not(feature = "runtime"), allow(dead_code))]

#[cfg(feature = "runtime")]
mod algorithm;
#[cfg(feature = "runtime")]
pub mod backend;
#[cfg(feature = "runtime")]
mod clock;
mod concurrency;
#[cfg(feature = "conformance")]
pub mod conformance;
mod decision;
mod error;
#[cfg(feature = "runtime")]
mod guard;
pub mod hot;
#[cfg(feature = "runtime")]
mod identity;
#[cfg(feature = "runtime")]
mod key;
#[cfg(feature = "runtime")]
mod limiter;
mod max_wait;
mod penalty;
#[cfg(feature = "runtime")]
mod plans;
mod policy;
pub mod refund;
mod rule;
#[cfg(feature = "runtime")]
mod store;
mod verdict;
#[cfg(feature = "runtime")]
mod wait;

/// Implements a capability trait ([`Peek`], [`Permits`], …): they are
/// usable as trait objects, so their methods answer boxed futures.
#[cfg(feature = "runtime")]
pub use async_trait::async_trait;
#[cfg(feature = "runtime")]
pub use clock::{Clock, ManualClock, SystemClock};
pub use concurrency::ConcurrencyLimit;
#[cfg(feature = "runtime")]
pub use concurrency::{Acquired, Permit};
pub use decision::{Decision, MAX_RULES, RuleStatus};
pub use error::{BackendError, ConfigError, Error};
#[cfg(feature = "runtime")]
pub use guard::{
    BreakerConfig, BreakerState, DEFAULT_DEADLINE, DEFAULT_DENY_CACHE_CAPACITY, GuardConfig,
    Guarded,
};
#[cfg(feature = "runtime")]
pub use hot::HotKeys;
pub use hot::{DEFAULT_LEASE_TTL, HotKey, Lease};
#[cfg(feature = "runtime")]
pub use identity::{Identity, IdentityKind, identity_key_of};
#[cfg(feature = "runtime")]
pub use key::{HASHED_IDENTITY_PREFIX, MAX_IDENTITY_LEN, push_identity, push_identity_bytes};
#[cfg(feature = "runtime")]
pub use limiter::{Attempt, DEFAULT_PREFIX, Limiter};
pub use max_wait::MaxWait;
pub use penalty::{MAX_PENALTY_DENIALS, MAX_PENALTY_STEPS, Penalty, PenaltyState};
#[cfg(feature = "runtime")]
pub use plans::{Plan, Plans};
pub use policy::{Algorithm, DEFAULT_DUPLICATE_WINDOW, Policy};
pub use refund::Receipt;
pub use rule::{MAX_WINDOW, Rate, Rule};
#[cfg(feature = "runtime")]
pub use store::memory::{DEFAULT_CAPACITY, MemoryStore};
#[cfg(feature = "runtime")]
pub use store::{
    AnnouncesResets, AssignedPlans, BlockList, BlockOrigin, Blocks, Capabilities,
    DEFAULT_MAX_PENALTY_BLOCKS, Forget, Forgetter, Leases, ListedBlock, MAX_ASSIGNED_PLANS,
    MAX_BLOCKS, MAX_BLOCKS_PAGE, Peek, Penalties, Permits, PlanAssignments, Refunds, Reset, Store,
    forwarded, required,
};
pub use verdict::{OnStoreError, Verdict};
#[cfg(feature = "runtime")]
pub use wait::{DEFAULT_MAX_WAITERS, Waitable, Waiters};
