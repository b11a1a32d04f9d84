//! Where the state lives: the [`Store`] contract, its capabilities, and the
//! memory store.
//!
//! - [`Store`]: rate checks, the one trait every store implements;
//! - [`FailureDomains`], [`Permits`], [`Leases`], [`Peek`], [`Reset`]: what
//!   only some stores do, each a
//!   trait of its own, so that code naming a store's type cannot ask it for
//!   what it lacks: it does not compile;
//! - [`Capabilities`]: the same set as a table of the store's type
//!   ([`Store::CAPABILITIES`]), for code that holds the store without
//!   naming it (the HTTP layer, the hot-key modes, the guard), declared in
//!   one line and checked by the compiler;
//! - [`ask`]: the one way to ask a store for a decision or a permit,
//!   guarded or not.

use std::future::Future;

use crate::decision::Decision;
use crate::error::Error;
use crate::policy::Policy;

pub mod ask;
pub(crate) mod assigned;
pub(crate) mod blocks;
pub(crate) mod capabilities;
pub(crate) mod memory;
pub(crate) mod traits;

pub use assigned::{AssignedPlans, MAX_ASSIGNED_PLANS};
pub use blocks::{
    BlockList, BlockOrigin, DEFAULT_MAX_PENALTY_BLOCKS, ListedBlock, MAX_BLOCKS, MAX_BLOCKS_PAGE,
};
pub use capabilities::Capabilities;
pub(crate) use capabilities::{Boxed, GuardOps, RefundOps};
pub use traits::{
    AnnouncesResets, Blocks, Bounded, FailureDomains, Forget, Forgetter, Leases, Peek, Penalties,
    Permits, PlanAssignments, Refunds, Reset,
};

/// A place that keeps rate-limit state and decides atomically.
///
/// One check is one atomic step: every rule of the policy is checked and the
/// request is recorded only if it is allowed, even when many tasks, processes
/// or instances check the same key at once.
///
/// Implemented by [`MemoryStore`](crate::MemoryStore) (in process) and
/// `limiter_redis::RedisStore` (shared). Both decide identically for
/// identical timestamps; the [conformance suite](crate::conformance) shows
/// it for any store.
///
/// What a store does besides rate checks is a trait of its own
/// ([`FailureDomains`], [`Permits`], [`Leases`]), declared with where its
/// state lives in [`CAPABILITIES`](Self::CAPABILITIES):
///
/// ```
/// use limiter_core::{Capabilities, Decision, Error, FailureDomains, Policy, Store};
///
/// /// A store of one's own across a network, whose nodes fail one by one.
/// struct Shared;
///
/// impl Store for Shared {
///     const CAPABILITIES: Capabilities<Self> = Capabilities::REMOTE.failure_domains();
///
///     async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
///         # let _ = (key, policy, cost);
///         // one atomic step on the backend
///         # unimplemented!()
///     }
/// }
///
/// impl FailureDomains for Shared {
///     fn failure_domain(&self, key: &str) -> u64 {
///         key.len() as u64 % 3 // the node that serves `key`
///     }
/// }
/// ```
pub trait Store: Send + Sync + 'static {
    /// Where the state lives and what the store does besides rate checks,
    /// for code that holds it without naming its type. Declares only traits
    /// the store implements: [`Capabilities::permits`] needs [`Permits`],
    /// and so on. By default [`Capabilities::REMOTE`]: calls cross a
    /// network, so the HTTP layer guards them, and nothing else.
    const CAPABILITIES: Capabilities<Self> = Capabilities::REMOTE;

    /// Checks a request of `cost` against `policy` on `key`, and records it if
    /// allowed. `key` is used as given (the [`Limiter`](crate::Limiter) adds
    /// its prefix).
    ///
    /// Fails with [`Error::Config`] when `cost` could never pass the policy,
    /// and with a store error when the store cannot answer.
    fn check(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send;

    /// Decides at once when the store can do so without waiting: the memory
    /// store always can; a network store cannot and answers `None` (the
    /// default), and the caller awaits [`check`](Self::check) instead.
    ///
    /// Lets a caller on the hot path skip the machinery of a future (a boxed
    /// future, an owned key). When it answers `Some`, the check has happened
    /// exactly as [`check`](Self::check) would have done it.
    fn try_check_now(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        let _ = (key, policy, cost);
        None
    }
}
