//! Exact rate limiting, shared through Redis or kept in memory.
//!
//! `limiter-core` is the runtime: the [`Store`] contract and its
//! [`Capabilities`], the in-memory store, the guard, the hot-key engine,
//! waiting, the decision pipeline every check of a limit takes
//! ([`decide`]), and the programmatic API, [`Limiter`]. It re-exports the model
//! (rules, policies, decisions, errors: the crate `limiter-model`). The
//! Tower layer and the `#[rate_limit]` macro for axum live in
//! `limiter-tower`.
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
//! - `test-util`: test helpers for stores built on this crate (the hot-key
//!   engine on a clock driven by hand).
//!
//! # Stores
//! [`MemoryStore`] is here; the Redis store is the crate `limiter-redis`,
//! the regional store `limiter-regional`. A store of one's own implements
//! [`Store`] with the parts in [`backend`], and runs the conformance suite
//! (the crate `limiter-conformance`).

// The pure algorithms, which the memory store runs.
pub(crate) use limiter_model::algorithm;

mod attempt;
pub mod backend;
mod clock;
mod concurrency;
pub mod decide;
mod guard;
pub mod hot;
mod identity;
mod key;
mod limiter;
mod offenders;
mod overrides;
mod plans;
mod store;
mod wait;

/// Implements a capability trait ([`KeyState`], [`Permits`], …): they are
/// usable as trait objects, so their methods answer boxed futures.
pub use async_trait::async_trait;
pub use attempt::{Attempt, GiveBack, Refunding, Refused};
pub use clock::{Clock, ManualClock, SystemClock};
pub use concurrency::{Acquired, ConcurrencyLimit, Permit};
pub use guard::{
    BreakerConfig, BreakerState, DEFAULT_DEADLINE, DEFAULT_DENY_CACHE_CAPACITY, GuardConfig,
    Guarded,
};
pub use hot::HotKeys;
pub use identity::{Identity, IdentityKind};
pub use key::{
    HASHED_IDENTITY_PREFIX, Key, MAX_IDENTITY_LEN, identity_key_of, push_identity,
    push_identity_bytes,
};
pub use limiter::{DEFAULT_PREFIX, Limiter};
pub use limiter_model::refund;
pub use limiter_model::{
    Algorithm, BackendError, ConfigError, DEFAULT_DUPLICATE_WINDOW, DEFAULT_LEASE_TTL,
    DURATION_UNITS, Decider, Decision, Error, HotKey, Lease, MAX_PENALTY_DENIALS,
    MAX_PENALTY_STEPS, MAX_RULES, MAX_WINDOW, MaxWait, OnStoreError, Penalty, PenaltyState, Policy,
    Rate, Receipt, Rule, RuleStatus, Verdict, parse_duration,
};
pub use offenders::{Denied, DeniedReport, TopDenied};
pub use overrides::{
    ActiveOverride, MAX_OVERRIDE, MAX_OVERRIDES, Override, OverrideMode, OverrideTable,
    validate_limit_name, validate_override_duration,
};
pub use plans::{Plan, Plans};
pub use store::memory::{DEFAULT_CAPACITY, MemoryStore};
pub use store::{
    AssignedPlans, BlockList, BlockOrigin, CONTROL_STATE_KEY, Capabilities, Change, ControlTables,
    DEFAULT_MAX_PENALTY_BLOCKS, Forget, Forgetter, KeyState, Leases, ListedBlock,
    MAX_ASSIGNED_PLANS, MAX_BLOCKS, MAX_BLOCKS_PAGE, MAX_REPORT_BYTES, MAX_REPORTERS, Permits,
    Report, SharedControl, Store, forwarded, required, validate_report,
};
pub use wait::{DEFAULT_MAX_WAITERS, Waitable, Waiters};
