//! What only some stores do, each a trait of its own: a store implements
//! those it can, and declares them in its
//! [`Capabilities`](super::Capabilities).

use std::future::Future;
use std::time::Duration;

use super::Store;
use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::decision::Decision;
use crate::error::Error;
use crate::hot::{LeaseGrant, LeaseRequest};
use crate::policy::Policy;

/// Parts of a store that fail on their own (the nodes of a Redis Cluster):
/// a guard keeps a circuit breaker per part, so that a part that is down
/// costs only its own keys.
pub trait FailureDomains: Store {
    /// The part of the store that serves `key`. 0 is the whole store.
    /// Called before every guarded call: it must be cheap.
    fn failure_domain(&self, key: &str) -> u64;

    /// A name for failure domain `domain` (a node's address), for the
    /// breaker's metrics and logs. Called once per domain.
    fn failure_domain_name(&self, domain: u64) -> String {
        domain.to_string()
    }
}

/// A store that bounds each of its calls itself, connecting included, and
/// answers [`Error::Timeout`] past the bound: a guard whose deadline is no
/// shorter adds no timer of its own, so each call has one deadline.
pub trait Bounded: Store {
    /// The bound of each call.
    fn deadline(&self) -> Duration;
}

/// Concurrency permits: requests in flight per key.
pub trait Permits: Store {
    /// Takes a permit of `limit` on `key` when fewer than
    /// [`limit.max()`](ConcurrencyLimit::max) permits of the key are held,
    /// in one atomic step. The permit is given back when it is dropped; on a
    /// shared store it is a lease that its holder renews while it is held.
    fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send;
}

/// Leases of a key's quota, which a leased policy
/// ([`Policy::with_lease`]) takes from a remote store so that an instance
/// hands permits out locally.
pub trait Leases: Store {
    /// Takes up to `request.want()` permits of `key` for
    /// `request.length()`, at least `request.need()` (else the request is
    /// denied and nothing is taken), in one atomic step. The store counts
    /// the permits as used at the lease's end.
    fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &LeaseRequest,
    ) -> impl Future<Output = Result<LeaseGrant, Error>> + Send;

    /// Gives back `unused` permits of `grant`, once the lease has ended;
    /// answers how many the store took back (none when the window that
    /// held them is over).
    fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &LeaseGrant,
        unused: u64,
    ) -> impl Future<Output = Result<u64, Error>> + Send;
}

/// Reading a key's state without changing it.
pub trait Peek: Store {
    /// What a check of `cost` against `policy` on `key` would answer now
    /// (allowed, remaining per rule, retry after, reset after), recording
    /// nothing: the next check answers as if this call had not been made.
    /// Fails with [`Error::Config`] for a cost the check would refuse.
    fn peek(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send;
}

/// Counting requests by their outcome: a check that says what it recorded,
/// and the refund of it once the request's outcome says it does not count
/// (see [`refund`](crate::refund) for what a refund means for each
/// algorithm; the buckets and GCRA refuse it).
///
/// Concurrent requests count while they are in flight, so no more than the
/// rules allow pass however many race; a request never refunded (its
/// outcome never came) stays counted.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{MemoryStore, Policy, Refunds, Rule};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let failures = Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?;
/// let (decision, receipt) = store.check_refundable("login:ada", &failures, 1).await?;
/// assert!(decision.allowed());
/// // The login succeeded: it does not count.
/// store.refund("login:ada", &failures, &receipt.unwrap()).await?;
/// let (again, _) = store.check_refundable("login:ada", &failures, 1).await?;
/// assert!(again.allowed());
/// # Ok::<(), limiter_core::Error>(())
/// # }).unwrap();
/// ```
pub trait Refunds: Store {
    /// Checks like [`Store::check`], and answers what it recorded when the
    /// request is allowed (`None` when denied). Fails with
    /// [`Error::Config`] for a policy whose algorithm cannot refund
    /// exactly ([`Policy::counts_by_outcome`]).
    fn check_refundable(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Option<crate::Receipt>), Error>> + Send;

    /// Gives back what `receipt` recorded on `key` under `policy`: the
    /// state becomes what it would be had that request never been
    /// recorded. What has left the rules' windows already, or was reset,
    /// is not given back.
    fn refund(
        &self,
        key: &str,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> impl Future<Output = Result<(), Error>> + Send;
}

/// Forgetting a key's state.
pub trait Reset: Store {
    /// Forgets what `key` holds under `policy`: its next check finds the
    /// whole quota. Resetting a key without state does nothing.
    fn reset(&self, key: &str, policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send;
}

/// What an instance forgets because a key was reset through a store it
/// shares with other instances ([`AnnouncesResets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forget {
    /// What it remembers of this key.
    Key(std::sync::Arc<str>),
    /// Everything it remembers of any key: notices may have been missed
    /// (the store's subscription was lost and is back).
    Everything,
}

/// Forgets what [`Forget`] says; answers `false` once its owner is gone,
/// and is then dropped.
pub type Forgetter = Box<dyn Fn(&Forget) -> bool + Send + Sync>;

/// A store shared by several instances that tells each instance of every
/// key reset through it, so that what the instance remembers of the key
/// (its deny cache, leases and samples) goes too: the
/// [`Guarded`](crate::Guarded) store and [`HotKeys`](crate::HotKeys)
/// register here when they are made.
pub trait AnnouncesResets: Store {
    /// Calls `forget` with each key reset through the store, by any
    /// instance, and with [`Forget::Everything`] when notices may have
    /// been missed.
    fn on_reset(&self, forget: Forgetter);
}

/// Blocking a key (an identity's, under a prefix) for a while, shared by
/// every instance using the store.
pub trait Blocks: Store {
    /// Blocks `key` for `duration`, replacing its block of the same
    /// `origin` (a block of the other origin stays: the key is blocked
    /// until the later one ends); every instance answers it blocked once
    /// this returns. Operator blocks and penalty-earned ones are bounded
    /// apart (see [`BlockList`](crate::BlockList)): past its bound a new
    /// operator block is refused, and a new penalty block takes the place
    /// of the penalty block that ends soonest.
    fn block(
        &self,
        key: &str,
        duration: Duration,
        origin: crate::BlockOrigin,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Lifts `key`'s blocks, of both origins; every instance answers it unblocked once this
    /// returns.
    fn unblock(&self, key: &str) -> impl Future<Output = Result<(), Error>> + Send;

    /// How long `key` stays blocked, as this instance knows it now, without
    /// a call (each request asks); `None` when it is not blocked.
    fn blocked(&self, key: &str) -> Option<Duration>;

    /// The list [`blocked`](Self::blocked) reads, when the store keeps one:
    /// a caller that finds it [empty](crate::BlockList::is_empty) skips the
    /// lookup (the HTTP layer, on every request).
    fn block_list(&self) -> Option<std::sync::Arc<crate::BlockList>> {
        None
    }
}

/// Penalties: denials counted per identity and limit, earning blocks.
pub trait Penalties: Store {
    /// Records a denial under `key` (an identity's under one limit) by
    /// `penalty`, in one atomic step; answers the block it earns, if any
    /// (the caller blocks the identity through [`Blocks`]).
    fn penalize(
        &self,
        key: &str,
        penalty: &crate::Penalty,
    ) -> impl Future<Output = Result<Option<Duration>, Error>> + Send;
}

/// Which plan each key has, kept by the store so that every instance using
/// it answers the same (the per-process [`Plans`](crate::Plans) resolver of
/// an application being the embedded default).
pub trait PlanAssignments: Store {
    /// Gives `key` the plan named `plan` (`None`: the default); every
    /// instance answers it once this returns.
    fn assign_plan(
        &self,
        key: &str,
        plan: Option<&str>,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// The plan `key` has, as this instance knows it now, without a call;
    /// `None` for the default.
    fn assigned_plan(&self, key: &str) -> Option<std::sync::Arc<str>>;

    /// How many keys have a plan other than the default.
    fn assigned_plans(&self) -> usize;
}
