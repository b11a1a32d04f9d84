//! Where the state lives: the [`Store`] contract, its capabilities, and the
//! memory store.
//!
//! - [`Store`]: rate checks, the one trait every store implements, on the
//!   hot path and static;
//! - [`Capabilities`] (its supertrait): where the state lives, how calls
//!   are bounded and fail, and each capability the store has, answered by
//!   the store as a trait object, for code that holds it without naming its
//!   type;
//! - the capability traits (`KeyState`, `Permits`, `Leases`,
//!   `SharedControl`, in `traits.rs`): what only some stores do, each a
//!   trait of its own, so that code naming a store's type cannot ask it
//!   for what it lacks: it does not compile;
//! - the shared control state's rows (`control.rs`): the [`Change`]s an
//!   operator or a penalty makes, and the [`ControlTables`] each instance
//!   reads without a call.

use std::future::Future;

use crate::{Decision, Error, Key, Policy};

pub(crate) mod assigned;
pub(crate) mod blocks;
pub(crate) mod control;
pub(crate) mod memory;
pub(crate) mod reports;
pub(crate) mod traits;

pub use assigned::{AssignedPlans, MAX_ASSIGNED_PLANS};
pub use blocks::{
    BlockList, BlockOrigin, DEFAULT_MAX_PENALTY_BLOCKS, ListedBlock, MAX_BLOCKS, MAX_BLOCKS_PAGE,
};
pub use control::{CONTROL_STATE_KEY, Change, ControlTables};
pub use reports::{MAX_REPORT_BYTES, MAX_REPORTERS, Report, validate_report};
pub use traits::{
    Capabilities, Forget, Forgetter, KeyState, Leases, Permits, SharedControl, forwarded, required,
};

/// A place that keeps rate-limit state and decides atomically.
///
/// One check is one atomic step: every rule of the policy is checked and the
/// request is recorded only if it is allowed, even when many tasks, processes
/// or instances check the same key at once.
///
/// Implemented by [`MemoryStore`](crate::MemoryStore) (in process) and
/// `limiter_redis::RedisStore` (shared). Both decide identically for
/// identical timestamps; the conformance suite (the crate
/// `limiter-conformance`) shows it for any store.
///
/// What a store does besides rate checks is a trait of its own
/// ([`KeyState`](crate::KeyState), [`Permits`](crate::Permits), …), which the store answers as itself in its
/// [`Capabilities`], with where its state lives and how it fails:
///
/// ```
/// use limiter_core::{
///     Acquired, Capabilities, ConcurrencyLimit, Decision, Error, Key, Permits, Policy, Store,
///     async_trait,
/// };
///
/// /// A store of one's own across a network, whose nodes fail one by one.
/// struct Shared;
///
/// impl Store for Shared {
///     async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
///         # let _ = (key, policy, cost);
///         // one atomic step on the backend
///         # unimplemented!()
///     }
/// }
///
/// impl Capabilities for Shared {
///     fn failure_domain(&self, key: &Key) -> u64 {
///         key.as_str().len() as u64 % 3 // the node that serves `key`
///     }
///
///     fn as_permits(&self) -> Option<&dyn Permits> {
///         Some(self) // compiles only because `Shared` implements `Permits`
///     }
/// }
///
/// #[async_trait]
/// impl Permits for Shared {
///     async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
///         # let _ = (key, limit);
///         // take a permit of the key in one atomic step
///         # unimplemented!()
///     }
/// }
///
/// let store: &dyn Capabilities = &Shared;
/// assert!(store.is_remote() && store.as_permits().is_some() && store.as_key_state().is_none());
/// ```
pub trait Store: Capabilities {
    /// Checks a request of `cost` against `policy` on `key`, and records it if
    /// allowed. `key` is used as given (the [`Limiter`](crate::Limiter) adds
    /// its prefix); its text ([`Key::as_str`]) is what the store keeps.
    ///
    /// Fails with [`Error::Config`] when `cost` could never pass the policy,
    /// and with a store error when the store cannot answer. A store that
    /// guards itself ([`Guarded`](crate::Guarded)) answers by its failure
    /// policy instead (the policy's own, [`Policy::on_store_error`], when it
    /// has one), saying so in [`Decision::decider`].
    fn check(
        &self,
        key: &Key,
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
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        let _ = (key, policy, cost);
        None
    }
}
