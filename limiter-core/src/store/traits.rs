//! What only some stores do, each a trait of its own, usable as a trait
//! object: a store implements those it can, and answers each as itself
//! through [`Capabilities`], so code holding a store without naming its
//! type (the HTTP layer, the guard, the hot-key modes) reaches them the
//! same way. The calls are cold or already boxed: the hot path (a rate
//! check) stays on [`Store`](super::Store).

use std::time::Duration;

use async_trait::async_trait;

use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::hot::{LeaseGrant, LeaseRequest};
use crate::{Decision, Error, Key, Policy};

use super::control::{Change, ControlTables};

/// What a store is and does besides rate checks, asked of the store
/// itself, whatever its type: where its state lives, how its calls are
/// bounded and fail, and each capability trait it implements, answered as
/// a trait object (`Some(self)`, which compiles only when the store
/// implements the trait). Every method has a default: a store overrides
/// what it has.
///
/// A wrapper answers each capability of the store it wraps in one line,
/// and so cannot drop one; the capability test over every wrapper and
/// store shows it.
pub trait Capabilities: Send + Sync + 'static {
    /// Whether calls cross a network (the default), so the HTTP layer
    /// guards them with a deadline, a circuit breaker and the failure
    /// policy. The memory store answers `false`.
    fn is_remote(&self) -> bool {
        true
    }

    /// The bound the store keeps on each of its calls, connecting
    /// included, answering [`Error::Timeout`] past it; a guard whose
    /// deadline is no shorter adds no timer of its own, so each call has
    /// one deadline. `None` (the default): unbounded.
    fn deadline(&self) -> Option<Duration> {
        None
    }

    /// The part of the store that serves `key`, failing on its own (a node
    /// of a Redis Cluster): a guard keeps a circuit breaker per part, so a
    /// part that is down costs only its keys. 0 (the default) is the whole
    /// store. Called before every guarded call: it must be cheap.
    fn failure_domain(&self, key: &Key) -> u64 {
        let _ = key;
        0
    }

    /// A name for failure domain `domain` (a node's address), for the
    /// breaker's metrics and logs. Called once per domain.
    fn failure_domain_name(&self, domain: u64) -> String {
        domain.to_string()
    }

    /// Whether the store guards its own calls, as
    /// [`Guarded`](crate::Guarded) does: one owner guards a store.
    fn is_guarded(&self) -> bool {
        false
    }

    /// Whether the store honours the policies' hot-key modes itself
    /// ([`HotKeys`](crate::HotKeys)), so that no one in front of it does.
    fn honours_hot_keys(&self) -> bool {
        false
    }

    /// Reading, forgetting and giving back a key's state ([`KeyState`]).
    fn as_key_state(&self) -> Option<&dyn KeyState> {
        None
    }

    /// Concurrency permits ([`Permits`]).
    fn as_permits(&self) -> Option<&dyn Permits> {
        None
    }

    /// Leases of a key's quota ([`Leases`]).
    fn as_leases(&self) -> Option<&dyn Leases> {
        None
    }

    /// What operators and penalties change and every instance reads
    /// ([`SharedControl`]).
    fn as_shared_control(&self) -> Option<&dyn SharedControl> {
        None
    }
}

/// `outer` when the wrapped store has the capability (`inner`), for a
/// wrapper that answers a capability through itself: it cannot claim one
/// the wrapped store lacks, nor drop one it has.
pub fn forwarded<'a, T: ?Sized, U: ?Sized>(inner: Option<&T>, outer: &'a U) -> Option<&'a U> {
    inner.map(|_| outer)
}

/// The capability `capability`, or [`Error::Unsupported`] naming `what`.
pub fn required<'a, T: ?Sized>(
    capability: Option<&'a T>,
    what: &'static str,
) -> Result<&'a T, Error> {
    capability.ok_or(Error::Unsupported(what))
}

/// Concurrency permits: requests in flight per key.
#[async_trait]
pub trait Permits: Send + Sync + 'static {
    /// Takes a permit of `limit` on `key` when fewer than
    /// [`limit.max()`](ConcurrencyLimit::max) permits of the key are held,
    /// in one atomic step. The permit is given back when it is dropped; on a
    /// shared store it is a lease that its holder renews while it is held.
    async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error>;
}

/// Leases of a key's quota, which a leased policy
/// ([`Policy::with_lease`]) takes from a remote store so that an instance
/// hands permits out locally.
#[async_trait]
pub trait Leases: Send + Sync + 'static {
    /// Takes up to `request.want()` permits of `key` for
    /// `request.length()`, at least `request.need()` (else the request is
    /// denied and nothing is taken), in one atomic step. The store counts
    /// the permits as used at the lease's end.
    async fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &LeaseRequest,
    ) -> Result<LeaseGrant, Error>;

    /// Gives back `unused` permits of `grant`, once the lease has ended;
    /// answers how many the store took back (none when the window that
    /// held them is over).
    async fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &LeaseGrant,
        unused: u64,
    ) -> Result<u64, Error>;
}

/// A key's state: read without changing it, forgotten, and given back
/// once a request's outcome says it does not count.
///
/// Counting requests by their outcome: [`check_refundable`](Self::check_refundable)
/// says what it recorded, and [`refund`](Self::refund) gives it back (see
/// [`refund`](crate::refund) for what a refund means for each algorithm;
/// the buckets and GCRA refuse it). Concurrent requests count while they
/// are in flight, so no more than the rules allow pass however many race;
/// a request never refunded (its outcome never came) stays counted.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Key, KeyState, MemoryStore, Policy, Rule};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let failures = Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?;
/// let ada = Key::from("login:ada");
/// let (decision, receipt) = store.check_refundable(&ada, &failures, 1).await?;
/// assert!(decision.allowed());
/// // The login succeeded: it does not count.
/// store.refund(&ada, &failures, &receipt.unwrap()).await?;
/// let (again, _) = store.check_refundable(&ada, &failures, 1).await?;
/// assert!(again.allowed());
/// # Ok::<(), limiter_core::Error>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait KeyState: Send + Sync + 'static {
    /// What a check of `cost` against `policy` on `key` would answer now
    /// (allowed, remaining per rule, retry after, reset after), recording
    /// nothing: the next check answers as if this call had not been made.
    /// Fails with [`Error::Config`] for a cost the check would refuse.
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error>;

    /// Forgets what `key` holds under `policy`: its next check finds the
    /// whole quota. Resetting a key without state does nothing.
    async fn reset(&self, key: &Key, policy: &Policy) -> Result<(), Error>;

    /// Checks like [`Store::check`](super::Store::check), and answers what it recorded when the
    /// request is allowed (`None` when denied). Fails with
    /// [`Error::Config`] for a policy whose algorithm cannot refund
    /// exactly ([`Policy::counts_by_outcome`]).
    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error>;

    /// Gives back what `receipt` recorded on `key` under `policy`: the
    /// state becomes what it would be had that request never been
    /// recorded. What has left the rules' windows already, or was reset,
    /// is not given back.
    async fn refund(
        &self,
        key: &Key,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> Result<(), Error>;
}

/// What an instance forgets because a key was reset through a store it
/// shares with other instances ([`SharedControl::on_reset`]).
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

/// What operators and penalties change and every instance using the
/// store reads: blocks, plan assignments and live overrides (each a row
/// of the [`ControlTables`], written by one [`Change`]), the penalty
/// counts that earn blocks, and the notices of keys reset. A change is
/// answered once every instance applies it; a read is local, without a
/// call, so every request makes it.
///
/// A store that keeps only some kinds of row refuses a change of another
/// with [`Error::Unsupported`].
#[async_trait]
pub trait SharedControl: Send + Sync + 'static {
    /// Makes `change`; every instance answers by it once this returns.
    async fn change(&self, change: Change<'_>) -> Result<(), Error>;

    /// The tables as this instance knows them now, read without a call.
    fn tables(&self) -> &ControlTables;

    /// Records a denial under `key` (an identity's under one limit) by
    /// `penalty`, in one atomic step; answers the block it earns, if any,
    /// which the caller makes (a [`Change::Block`] of `block_key`, of
    /// origin [`Penalty`](crate::BlockOrigin::Penalty)). A store that also
    /// counts the denial elsewhere after answering (the regional store, in
    /// every other region) blocks `block_key` itself when a count there
    /// earns the block.
    async fn penalize(
        &self,
        key: &str,
        penalty: &crate::Penalty,
        block_key: &str,
    ) -> Result<Option<Duration>, Error>;

    /// Calls `forget` with each key reset through the store, by any
    /// instance, and with [`Forget::Everything`] when notices may have
    /// been missed, so that what an instance remembers of a key (its deny
    /// cache, leases and samples) goes too: the [`Guarded`](crate::Guarded)
    /// store and [`HotKeys`](crate::HotKeys) register here when they are
    /// made. A store that no other instance shares (the default) has
    /// nothing to tell.
    fn on_reset(&self, forget: Forgetter) {
        drop(forget);
    }

    /// Publishes `body` as `instance`'s report on `board` (what it counted
    /// of a limit's top offenders, say), replacing its previous one there;
    /// [`reports`](Self::reports) reads it until `ttl` has passed. A report
    /// past [`validate_report`](crate::validate_report)'s bounds, or one
    /// more instance than [`MAX_REPORTERS`](crate::MAX_REPORTERS) on a
    /// board, is refused with [`Error::Full`]. A store that no other
    /// instance shares keeps them in process; one that keeps none refuses
    /// with [`Error::Unsupported`].
    async fn publish_report(
        &self,
        board: &str,
        instance: &str,
        body: &str,
        ttl: Duration,
    ) -> Result<(), Error> {
        let _ = (board, instance, body, ttl);
        Err(Error::Unsupported("reports"))
    }

    /// Every instance's latest report on `board` still within its time to
    /// live, with its age by the store's clock, in no particular order.
    async fn reports(&self, board: &str) -> Result<Vec<crate::Report>, Error> {
        let _ = board;
        Err(Error::Unsupported("reports"))
    }
}
