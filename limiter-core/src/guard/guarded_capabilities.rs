//! What a guarded store does besides its guarded checks: each capability
//! of the guarded store, answered through the guard (the deadline, the
//! key's breaker, and what the guard remembers of the key).

use async_trait::async_trait;

use super::*;
use crate::store::{Capabilities, forwarded};
use crate::{
    AnnouncesResets, Blocks, Leases, Peek, Penalties, Permits, PlanAssignments, Refunds, Reset,
};

impl<S: Store, C: Clock + Clone> Store for Guarded<S, C> {
    /// Checks with the configured failure policy. Failing open answers an
    /// allowed decision with every rule's whole quota remaining; failing
    /// closed answers [`Error::Unavailable`].
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        (self
            .check_with(key, policy, cost, self.inner.config.on_store_error)
            .await?)
            .into_decision(policy)
    }

    fn verdict(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> impl Future<Output = Result<Verdict, Error>> + Send {
        let on_error = on_error.unwrap_or(self.inner.config.on_store_error);
        self.check_with(key, policy, cost, on_error)
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

    fn failure_domain(&self, key: &str) -> u64 {
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

    fn as_permits(&self) -> Option<&dyn Permits> {
        forwarded(self.inner.store.as_permits(), self)
    }

    fn as_leases(&self) -> Option<&dyn Leases> {
        forwarded(self.inner.store.as_leases(), self)
    }

    fn as_peek(&self) -> Option<&dyn Peek> {
        forwarded(self.inner.store.as_peek(), self)
    }

    fn as_reset(&self) -> Option<&dyn Reset> {
        forwarded(self.inner.store.as_reset(), self)
    }

    fn as_refunds(&self) -> Option<&dyn Refunds> {
        forwarded(self.inner.store.as_refunds(), self)
    }

    fn as_blocks(&self) -> Option<&dyn Blocks> {
        forwarded(self.inner.store.as_blocks(), self)
    }

    fn as_penalties(&self) -> Option<&dyn Penalties> {
        forwarded(self.inner.store.as_penalties(), self)
    }

    fn as_plan_assignments(&self) -> Option<&dyn PlanAssignments> {
        forwarded(self.inner.store.as_plan_assignments(), self)
    }

    fn as_overrides(&self) -> Option<&dyn crate::Overrides> {
        forwarded(self.inner.store.as_overrides(), self)
    }

    /// The store's own: a notice needs no guard.
    fn as_reset_announcer(&self) -> Option<&dyn AnnouncesResets> {
        self.inner.store.as_reset_announcer()
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Permits for Guarded<S, C> {
    /// Takes a permit with the configured failure policy.
    async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        self.acquire_permit_or(key, limit, None).await
    }

    async fn acquire_permit_or(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> Result<Acquired, Error> {
        let on_error = on_error.unwrap_or(self.inner.config.on_store_error);
        self.acquire_permit_with(key, limit, on_error).await
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Leases for Guarded<S, C> {
    /// Leases through the key's breaker, with no failure policy: the lease's
    /// caller ([`HotKeys`](crate::HotKeys)) then checks through
    /// [`Store::verdict`], which applies it.
    async fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &LeaseRequest,
    ) -> Result<LeaseGrant, Error> {
        let leases = required(self.inner.store.as_leases(), "leases")?;
        self.through_breaker(key, || leases.lease(key, policy, request))
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

#[async_trait]
impl<S: Store, C: Clock + Clone> Peek for Guarded<S, C> {
    /// Peeks within the deadline, through the key's breaker.
    async fn peek(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let peek = required(self.inner.store.as_peek(), "peek")?;
        self.through_breaker(key, || peek.peek(key, policy, cost))
            .await
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Reset for Guarded<S, C> {
    /// Resets the store within the deadline, through the key's breaker, and
    /// forgets the key here too, before the store does and again after (a
    /// denial cached meanwhile came from the state being reset).
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        let reset = required(self.inner.store.as_reset(), "reset")?;
        self.forget_local(key, policy);
        let reset = self.through_breaker(key, || reset.reset(key, policy)).await;
        self.forget_local(key, policy);
        unconfirmed(reset)
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Refunds for Guarded<S, C> {
    /// Checks with the configured failure policy; a request the failure
    /// policy decided has no receipt (it stays counted where it was).
    async fn check_refundable(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error> {
        let (verdict, receipt) = self.check_refundable_or(key, policy, cost, None).await?;
        Ok((verdict.into_decision(policy)?, receipt))
    }

    /// Refunds within the deadline, through the key's breaker, and forgets
    /// the key's cached denial here (the refund may end it).
    async fn refund(
        &self,
        key: &str,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> Result<(), Error> {
        let refunds = required(self.inner.store.as_refunds(), "refunds")?;
        let refunded = self
            .through_breaker(key, || refunds.refund(key, policy, receipt))
            .await;
        if let Some(cache) = &self.inner.deny_cache {
            cache.remove(key);
        }
        refunded
    }

    async fn check_refundable_or(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> Result<(Verdict, Option<crate::Receipt>), Error> {
        let refunds = required(self.inner.store.as_refunds(), "refunds")?;
        let on_error = on_error.unwrap_or(self.inner.config.on_store_error);
        let check = || refunds.check_refundable(key, policy, cost);
        let (verdict, receipt) = self.decide_with(key, policy, cost, on_error, check).await?;
        Ok((verdict, receipt.flatten()))
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Blocks for Guarded<S, C> {
    /// Blocks within the deadline, through the key's breaker.
    async fn block(
        &self,
        key: &str,
        duration: Duration,
        origin: crate::BlockOrigin,
    ) -> Result<(), Error> {
        let blocks = required(self.inner.store.as_blocks(), "blocks")?;
        unconfirmed(
            self.through_breaker(key, || blocks.block(key, duration, origin))
                .await,
        )
    }

    async fn unblock(&self, key: &str) -> Result<(), Error> {
        let blocks = required(self.inner.store.as_blocks(), "blocks")?;
        unconfirmed(self.through_breaker(key, || blocks.unblock(key)).await)
    }

    fn blocked(&self, key: &str) -> Option<Duration> {
        self.inner.store.as_blocks()?.blocked(key)
    }

    fn block_list(&self) -> Option<Arc<crate::BlockList>> {
        self.inner.store.as_blocks()?.block_list()
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> Penalties for Guarded<S, C> {
    async fn penalize(
        &self,
        key: &str,
        penalty: &crate::Penalty,
    ) -> Result<Option<Duration>, Error> {
        let penalties = required(self.inner.store.as_penalties(), "penalties")?;
        self.through_breaker(key, || penalties.penalize(key, penalty))
            .await
    }

    async fn penalize_for(
        &self,
        key: &str,
        penalty: &crate::Penalty,
        block_key: &str,
    ) -> Result<Option<Duration>, Error> {
        let penalties = required(self.inner.store.as_penalties(), "penalties")?;
        self.through_breaker(key, || penalties.penalize_for(key, penalty, block_key))
            .await
    }
}

#[async_trait]
impl<S: Store, C: Clock + Clone> PlanAssignments for Guarded<S, C> {
    async fn assign_plan(&self, key: &str, plan: Option<&str>) -> Result<(), Error> {
        let plans = required(self.inner.store.as_plan_assignments(), "plan assignments")?;
        unconfirmed(
            self.through_breaker(key, || plans.assign_plan(key, plan))
                .await,
        )
    }

    fn assigned_plan(&self, key: &str) -> Option<Arc<str>> {
        self.inner.store.as_plan_assignments()?.assigned_plan(key)
    }

    fn assigned_plans(&self) -> usize {
        self.inner
            .store
            .as_plan_assignments()
            .map_or(0, |plans| plans.assigned_plans())
    }
}

/// Changes go through the breaker of the store's first part (an
/// override names no key); reads are the wrapped store's own.
#[async_trait]
impl<S: Store, C: Clock + Clone> crate::Overrides for Guarded<S, C> {
    async fn set_override(
        &self,
        limit: &str,
        value: &crate::Override,
        duration: Duration,
    ) -> Result<(), Error> {
        let overrides = required(self.inner.store.as_overrides(), "overrides")?;
        unconfirmed(
            self.through_breaker("", || overrides.set_override(limit, value, duration))
                .await,
        )
    }

    async fn clear_override(&self, limit: &str) -> Result<(), Error> {
        let overrides = required(self.inner.store.as_overrides(), "overrides")?;
        unconfirmed(
            self.through_breaker("", || overrides.clear_override(limit))
                .await,
        )
    }

    fn override_of(&self, limit: &str) -> Option<(Arc<crate::Override>, Duration)> {
        self.inner.store.as_overrides()?.override_of(limit)
    }

    fn overrides(&self) -> Vec<crate::ActiveOverride> {
        (self.inner.store.as_overrides()).map_or_else(Vec::new, |o| o.overrides())
    }

    fn override_table(&self) -> Option<Arc<crate::OverrideTable>> {
        self.inner.store.as_overrides()?.override_table()
    }
}

impl<S: Store, C: Clock + Clone> Guarded<S, C> {
    /// `call` within the deadline, through the key's breaker: an open
    /// breaker answers [`Error::Unavailable`] at once. For calls without a
    /// failure policy (a lease, whose caller then checks through
    /// [`Store::verdict`], which applies it; a peek or a reset fails).
    async fn through_breaker<T, F: Future<Output = Result<T, Error>>>(
        &self,
        key: &str,
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
    fn forget_local(&self, key: &str, policy: &Policy) {
        if let Some(cache) = &self.inner.deny_cache {
            cache.remove(key);
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
