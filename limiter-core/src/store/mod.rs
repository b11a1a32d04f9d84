//! Where the state lives: the [`Store`] trait and its implementations.

use std::future::Future;

use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::decision::Decision;
use crate::error::Error;
use crate::hot::{LeaseGrant, LeaseRequest};
use crate::policy::Policy;
use crate::verdict::{OnStoreError, Verdict};

pub(crate) mod memory;

/// A place that keeps rate-limit state and decides atomically.
///
/// One check is one atomic step: every rule of the policy is checked and the
/// request is recorded only if it is allowed, even when many tasks, processes
/// or instances check the same key at once.
///
/// Implemented by [`MemoryStore`](crate::MemoryStore) (in process) and
/// `limiter_redis::RedisStore` (shared). Both decide identically for
/// identical timestamps.
pub trait Store: Send + Sync + 'static {
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

    /// Whether calls cross a network and so can be slow or fail. The HTTP
    /// layer guards such stores with a deadline, a circuit breaker and a
    /// failure policy ([`Guarded`](crate::Guarded)); local ones need none.
    fn is_remote(&self) -> bool {
        true
    }

    /// The part of the store that fails on its own and serves `key`. A
    /// [`Guarded`](crate::Guarded) store keeps a circuit breaker per failure
    /// domain, so that a part that is down costs only its own keys. The
    /// default, 0, is the whole store; a Redis Cluster answers the node that
    /// serves the key's slot.
    ///
    /// Called before every guarded call: it must be cheap.
    fn failure_domain(&self, key: &str) -> u64 {
        let _ = key;
        0
    }

    /// A name for failure domain `domain` (a node's address), for the
    /// breaker's metrics and logs. Called once per domain.
    fn failure_domain_name(&self, domain: u64) -> String {
        domain.to_string()
    }

    /// Whether this store guards its own calls (a deadline, a circuit
    /// breaker, a failure policy), as [`Guarded`](crate::Guarded) does. One
    /// owner guards a store: the HTTP layer does not wrap a guarded store
    /// again, and calls [`check_verdict`](Self::check_verdict) with each
    /// route's failure policy.
    fn is_guarded(&self) -> bool {
        false
    }

    /// Checks like [`check`](Self::check), saying how the request was
    /// decided. A guarded store applies `on_error` when its store fails (its
    /// own failure policy when `None`); other stores decide themselves
    /// ([`Verdict::Store`]) and ignore it.
    fn check_verdict(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> impl Future<Output = Result<Verdict, Error>> + Send {
        let _ = on_error;
        async move { self.check(key, policy, cost).await.map(Verdict::Store) }
    }

    /// Takes a permit of `limit` on `key` when fewer than
    /// [`limit.max()`](ConcurrencyLimit::max) permits of the key are held,
    /// in one atomic step. The permit is given back when it is dropped; on a
    /// shared store it is a lease that its holder renews while it is held.
    ///
    /// The default answers [`Error::Unsupported`]: a store of the caller's
    /// own keeps no permits unless it says how.
    fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        let _ = (key, limit);
        async { Err(Error::Unsupported("concurrency limits")) }
    }

    /// Takes a permit like [`acquire_permit`](Self::acquire_permit). A
    /// guarded store applies `on_error` when its store fails (its own
    /// failure policy when `None`); other stores ignore it.
    fn acquire_permit_on_error(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        let _ = on_error;
        self.acquire_permit(key, limit)
    }

    /// Takes up to `request.want()` permits of `key` for
    /// `request.length()`, at least `request.need()` (else the request is
    /// denied and nothing is taken), in one atomic step: what a leased
    /// policy ([`Policy::with_lease`]) asks of a remote store through
    /// [`HotKeys`](crate::HotKeys). The store counts the permits as used
    /// at the lease's end.
    ///
    /// The default answers [`Error::Unsupported`]; the Redis store
    /// implements it.
    fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &LeaseRequest,
    ) -> impl Future<Output = Result<LeaseGrant, Error>> + Send {
        let _ = (key, policy, request);
        async { Err(Error::Unsupported("leases")) }
    }

    /// Gives back `unused` permits of `grant`, once the lease has ended;
    /// answers how many the store took back (none when the window that
    /// held them is over).
    fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &LeaseGrant,
        unused: u64,
    ) -> impl Future<Output = Result<u64, Error>> + Send {
        let _ = (key, policy, grant, unused);
        async { Ok(0) }
    }
}
