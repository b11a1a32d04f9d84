//! What a guarded store does besides its guarded checks: each capability
//! of the guarded store, answered through the guard (the deadline, the
//! key's breaker, and what the guard remembers of the key).

use std::sync::LazyLock;

use async_trait::async_trait;

use super::*;
use crate::CONTROL_STATE_KEY;

/// [`CONTROL_STATE_KEY`] as a key, built once: the key of the breaker that
/// control writes and reports go through.
static CONTROL_STATE: LazyLock<Key> = LazyLock::new(|| Key::from(CONTROL_STATE_KEY));
use crate::store::{Capabilities, Change, ControlTables, KeyState, SharedControl, forwarded};
use crate::{Key, Leases, Permits};

impl<S: Store, C: Clock + Clone> Store for Guarded<S, C> {
    /// Checks with the policy's failure policy, or the guard's when it has
    /// none, saying who decided ([`Decision::decider`]): failing open
    /// answers an allowed decision with every rule's whole quota
    /// remaining; failing closed answers [`Error::Unavailable`].
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let on_error = self.on_error(policy.on_store_error());
        (self.check_with(key, policy, cost, on_error).await?).into_decision(policy)
    }
}

/// What the guarded store is and has, each capability through the guard.
impl<S: Store, C: Clock + Clone> Capabilities for Guarded<S, C> {
    fn is_remote(&self) -> bool {
        self.inner.store.is_remote()
    }

    /// The guard's deadline, or the store's own when shorter.
    fn deadline(&self) -> Option<Duration> {
        let own = self.inner.config.deadline;
        Some(
            self.inner
                .store
                .deadline()
                .map_or(own, |store| store.min(own)),
        )
    }

    fn failure_domain(&self, key: &Key) -> u64 {
        self.inner.store.failure_domain(key)
    }

    fn failure_domain_name(&self, domain: u64) -> String {
        self.inner.store.failure_domain_name(domain)
    }

    fn is_guarded(&self) -> bool {
        true
    }

    fn honours_hot_keys(&self) -> bool {
        self.inner.store.honours_hot_keys()
    }

    fn as_key_state(&self) -> Option<&dyn KeyState> {
        forwarded(self.inner.store.as_key_state(), self)
    }

    fn as_permits(&self) -> Option<&dyn Permits> {
        forwarded(self.inner.store.as_permits(), self)
    }

    fn as_leases(&self) -> Option<&dyn Leases> {
        forwarded(self.inner.store.as_leases(), self)
    }

    fn as_shared_control(&self) -> Option<&dyn SharedControl> {
        forwarded(self.inner.store.as_shared_control(), self)
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Permits for Guarded<S, C> {
    /// Takes a permit with the limit's failure policy, or the guard's when
    /// it has none.
    async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        let on_error = self.on_error(limit.on_store_error());
        self.acquire_permit_with(key, limit, on_error).await
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Leases for Guarded<S, C> {
    /// Leases through the key's breaker, with no failure policy: the lease's
    /// caller ([`HotKeys`](crate::HotKeys)) then checks through
    /// [`Store::check`], which applies it.
    async fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &LeaseRequest,
    ) -> Result<LeaseGrant, Error> {
        let leases = required(self.inner.store.as_leases(), "leases")?;
        self.through_breaker(&Key::from(key), || leases.lease(key, policy, request))
            .await
    }

    async fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &LeaseGrant,
        unused: u64,
    ) -> Result<u64, Error> {
        let Some(leases) = self.inner.store.as_leases() else {
            return Ok(0);
        };
        self.within_deadline(|| leases.end_lease(key, policy, grant, unused))
            .await
    }
}

/// Each call within the deadline, through the key's breaker; a check
/// counted by outcome with the failure policy.
#[async_trait]
impl<S: Store, C: Clock + Clone> KeyState for Guarded<S, C> {
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let state = self.key_state()?;
        self.through_breaker(key, || state.peek(key, policy, cost))
            .await
    }

    /// Resets the store and forgets the key here too, before the store
    /// does and again after (a denial cached meanwhile came from the state
    /// being reset).
    async fn reset(&self, key: &Key, policy: &Policy) -> Result<(), Error> {
        let state = self.key_state()?;
        self.forget_local(key, policy);
        let reset = self.through_breaker(key, || state.reset(key, policy)).await;
        self.forget_local(key, policy);
        unconfirmed(reset)
    }

    /// Checks with the policy's failure policy, or the guard's; a request
    /// the failure policy decided has no receipt (it stays counted where
    /// it was).
    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error> {
        let state = self.key_state()?;
        let on_error = self.on_error(policy.on_store_error());
        let check = || state.check_refundable(key, policy, cost);
        let (verdict, receipt) = self.decide_with(key, policy, cost, on_error, check).await?;
        Ok((verdict.into_decision(policy)?, receipt.flatten()))
    }

    /// Refunds and forgets the key's cached denial here (the refund may
    /// end it).
    async fn refund(
        &self,
        key: &Key,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> Result<(), Error> {
        let state = self.key_state()?;
        let refunded = self
            .through_breaker(key, || state.refund(key, policy, receipt))
            .await;
        if let Some(cache) = &self.inner.deny_cache {
            cache.remove(key.as_str());
        }
        refunded
    }
}

/// Changes and reports within the deadline, through the breaker of the
/// part holding the control state ([`CONTROL_STATE_KEY`](crate::CONTROL_STATE_KEY)),
/// whatever key a change names: on a Redis Cluster, the node holding
/// `{limiter:resets}`. Reads of the tables and notices are the wrapped
/// store's own; a penalty is counted on its key, through that key's
/// breaker.
#[async_trait]
impl<S: Store, C: Clock + Clone> SharedControl for Guarded<S, C> {
    async fn change(&self, change: Change<'_>) -> Result<(), Error> {
        let shared = self.shared_control()?;
        unconfirmed(
            self.through_breaker(&CONTROL_STATE, || shared.change(change))
                .await,
        )
    }

    /// The wrapped store's; empty tables when it keeps none.
    fn tables(&self) -> &ControlTables {
        match self.inner.store.as_shared_control() {
            Some(shared) => shared.tables(),
            None => ControlTables::none(),
        }
    }

    async fn penalize(
        &self,
        key: &str,
        penalty: &crate::Penalty,
        block_key: &str,
    ) -> Result<Option<Duration>, Error> {
        let shared = self.shared_control()?;
        self.through_breaker(&Key::from(key), || shared.penalize(key, penalty, block_key))
            .await
    }

    /// The store's own: a notice needs no guard.
    fn on_reset(&self, forget: crate::Forgetter) {
        if let Some(shared) = self.inner.store.as_shared_control() {
            shared.on_reset(forget);
        }
    }

    async fn publish_report(
        &self,
        board: &str,
        instance: &str,
        body: &str,
        ttl: Duration,
    ) -> Result<(), Error> {
        let shared = self.shared_control()?;
        self.through_breaker(&CONTROL_STATE, || {
            shared.publish_report(board, instance, body, ttl)
        })
        .await
    }

    async fn reports(&self, board: &str) -> Result<Vec<crate::Report>, Error> {
        let shared = self.shared_control()?;
        (self.through_breaker(&CONTROL_STATE, || shared.reports(board))).await
    }
}

impl<S: Store, C: Clock + Clone> Guarded<S, C> {
    /// `own` (a policy's or a limit's failure policy), else the guard's.
    fn on_error(&self, own: Option<OnStoreError>) -> OnStoreError {
        own.unwrap_or(self.inner.config.on_store_error)
    }

    fn key_state(&self) -> Result<&dyn KeyState, Error> {
        required(self.inner.store.as_key_state(), "key state")
    }

    fn shared_control(&self) -> Result<&dyn SharedControl, Error> {
        required(self.inner.store.as_shared_control(), "shared control")
    }

    /// `call` within the deadline, through the key's breaker: an open
    /// breaker answers [`Error::Unavailable`] at once. For calls without a
    /// failure policy (a lease, whose caller then checks through
    /// [`Store::check`], which applies it; a peek or a reset fails).
    async fn through_breaker<T, F: Future<Output = Result<T, Error>>>(
        &self,
        key: &Key,
        call: impl FnOnce() -> F,
    ) -> Result<T, Error> {
        let breaker = self.breaker(key);
        match self.call(&breaker, call).await {
            Called::Answered(answer) => answer,
            Called::Failed(error) => {
                Err(error.unwrap_or_else(|| Error::Unavailable(breaker.until_probe())))
            }
        }
    }

    /// Forgets what this instance remembers of `key`: a denial in the
    /// deny cache, the fallback's state.
    fn forget_local(&self, key: &Key, policy: &Policy) {
        if let Some(cache) = &self.inner.deny_cache {
            cache.remove(key.as_str());
        }
        self.inner
            .fallback
            .reset_at(key, policy, self.inner.clock.now_micros());
    }
}

/// An admin change (a block, an unblock, a plan, a reset) that the
/// deadline cut short was sent, and may still be made:
/// [`Error::Unconfirmed`] says so.
fn unconfirmed<T>(changed: Result<T, Error>) -> Result<T, Error> {
    match changed {
        Err(error @ Error::Timeout(_)) => Err(Error::Unconfirmed(Box::new(error))),
        other => other,
    }
}
