//! `HotKeys` as a store: the check, the peek and the reset through the
//! hot-key modes, every other capability the wrapped store's own.

use async_trait::async_trait;

use super::*;
use crate::store::{Capabilities, forwarded, required};
use crate::{
    AnnouncesResets, Blocks, Leases, Peek, Penalties, Permits, PlanAssignments, Refunds, Reset,
};

impl<S: Store> Store for HotKeys<S> {
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        (self.honour(key, policy, cost, None).await?).into_decision(policy)
    }

    fn try_check_now(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        // A hot-key mode keeps state of its own: it is awaited.
        if policy.hot_key().is_some() {
            return None;
        }
        self.store.try_check_now(key, policy, cost)
    }

    fn verdict(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> impl Future<Output = Result<Verdict, Error>> + Send {
        self.honour(key, policy, cost, on_error)
    }
}

/// The wrapped store's, honouring the hot-key modes. Requests counted by
/// outcome go to the store directly: a hot-key mode's local state (a
/// lease, a sample) could not give one back.
impl<S: Store> Capabilities for HotKeys<S> {
    fn is_remote(&self) -> bool {
        self.store.is_remote()
    }

    fn deadline(&self) -> Option<std::time::Duration> {
        self.store.deadline()
    }

    fn failure_domain(&self, key: &str) -> u64 {
        self.store.failure_domain(key)
    }

    fn failure_domain_name(&self, domain: u64) -> String {
        self.store.failure_domain_name(domain)
    }

    fn is_guarded(&self) -> bool {
        self.store.is_guarded()
    }

    fn honours_hot_keys(&self) -> bool {
        true
    }

    fn as_peek(&self) -> Option<&dyn Peek> {
        forwarded(self.store.as_peek(), self)
    }

    fn as_reset(&self) -> Option<&dyn Reset> {
        forwarded(self.store.as_reset(), self)
    }

    fn as_permits(&self) -> Option<&dyn Permits> {
        self.store.as_permits()
    }

    fn as_leases(&self) -> Option<&dyn Leases> {
        self.store.as_leases()
    }

    fn as_refunds(&self) -> Option<&dyn Refunds> {
        self.store.as_refunds()
    }

    fn as_blocks(&self) -> Option<&dyn Blocks> {
        self.store.as_blocks()
    }

    fn as_penalties(&self) -> Option<&dyn Penalties> {
        self.store.as_penalties()
    }

    fn as_plan_assignments(&self) -> Option<&dyn PlanAssignments> {
        self.store.as_plan_assignments()
    }

    fn as_overrides(&self) -> Option<&dyn crate::Overrides> {
        self.store.as_overrides()
    }

    fn as_reset_announcer(&self) -> Option<&dyn AnnouncesResets> {
        self.store.as_reset_announcer()
    }
}

#[async_trait]
impl<S: Store> Peek for HotKeys<S> {
    async fn peek(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let peek = required(self.store.as_peek(), "peek")?;
        self.peek_by(peek, key, policy, cost).await
    }
}

#[async_trait]
impl<S: Store> Reset for HotKeys<S> {
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        let reset = required(self.store.as_reset(), "reset")?;
        self.reset_by(reset, key, policy).await
    }
}

impl<S: Store> HotKeys<S> {
    /// What a check would answer now, recording nothing (see [`Peek`]): a
    /// sharded policy reads the shard the next request goes to (a share of
    /// the limit); a leased one reads the store, where permits leased by
    /// any instance count as used until they come back.
    async fn peek_by(
        &self,
        peek: &dyn Peek,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        if let Some(HotKey::Shard { shards }) = policy.hot_key()
            && !self.store.honours_hot_keys()
        {
            let (sub_key, share) =
                crate::hot::shard::next(&self.state.instance, key, policy, shards);
            return peek.peek(&sub_key, &share, cost).await;
        }
        peek.peek(key, policy, cost).await
    }

    /// Forgets `key`'s state in the store and in this instance (see
    /// [`Reset`]): its lease and its last sample, or every shard.
    async fn reset_by(&self, reset: &dyn Reset, key: &str, policy: &Policy) -> Result<(), Error> {
        let state = &self.state;
        state.leases.forget(key);
        state.samples.forget(key);
        let result = match policy.hot_key() {
            Some(HotKey::Shard { shards }) if !self.store.honours_hot_keys() => {
                let (keys, share) = crate::hot::shard::shards_of(key, policy, shards);
                for sub_key in &keys {
                    reset.reset(sub_key, &share).await?;
                }
                Ok(())
            }
            _ => reset.reset(key, policy).await,
        };
        // A lease or sample taken meanwhile came from the state being reset.
        state.leases.forget(key);
        state.samples.forget(key);
        result
    }
}
