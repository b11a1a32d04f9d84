//! `HotKeys` as a store: the check, the peek and the reset through the
//! hot-key modes, every other capability the wrapped store's own.

use async_trait::async_trait;

use super::*;
use crate::store::{Capabilities, KeyState, SharedControl, forwarded, required};
use crate::{Key, Leases, Permits};

impl<S: Store> Store for HotKeys<S> {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        (self.honour(key, policy, cost).await?).into_decision(policy)
    }

    fn try_check_now(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        // A hot-key mode keeps state of its own: it is awaited.
        if policy.hot_key().is_some() {
            return None;
        }
        self.store.try_check_now(key, policy, cost)
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

    fn failure_domain(&self, key: &Key) -> u64 {
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

    fn as_key_state(&self) -> Option<&dyn KeyState> {
        forwarded(self.store.as_key_state(), self)
    }

    fn as_permits(&self) -> Option<&dyn Permits> {
        self.store.as_permits()
    }

    fn as_leases(&self) -> Option<&dyn Leases> {
        self.store.as_leases()
    }

    fn as_shared_control(&self) -> Option<&dyn SharedControl> {
        self.store.as_shared_control()
    }
}

/// The peek and the reset through the hot-key modes; requests counted by
/// outcome go to the store directly.
#[async_trait]
impl<S: Store> KeyState for HotKeys<S> {
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        let state = required(self.store.as_key_state(), "key state")?;
        self.peek_by(state, key, policy, cost).await
    }

    async fn reset(&self, key: &Key, policy: &Policy) -> Result<(), Error> {
        let state = required(self.store.as_key_state(), "key state")?;
        self.reset_by(state, key, policy).await
    }

    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error> {
        let state = required(self.store.as_key_state(), "key state")?;
        state.check_refundable(key, policy, cost).await
    }

    async fn refund(
        &self,
        key: &Key,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> Result<(), Error> {
        let state = required(self.store.as_key_state(), "key state")?;
        state.refund(key, policy, receipt).await
    }
}

impl<S: Store> HotKeys<S> {
    /// What a check would answer now, recording nothing (see [`KeyState::peek`]): a
    /// sharded policy reads the shard the next request goes to (a share of
    /// the limit); a leased one reads the store, where permits leased by
    /// any instance count as used until they come back.
    async fn peek_by(
        &self,
        peek: &dyn KeyState,
        key: &Key,
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
    /// [`KeyState::reset`]): its lease and its last sample, or every shard.
    async fn reset_by(
        &self,
        reset: &dyn KeyState,
        key: &Key,
        policy: &Policy,
    ) -> Result<(), Error> {
        let state = &self.state;
        state.leases.forget(key.as_str());
        state.samples.forget(key.as_str());
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
        state.leases.forget(key.as_str());
        state.samples.forget(key.as_str());
        result
    }
}
