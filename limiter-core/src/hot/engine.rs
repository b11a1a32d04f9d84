//! [`HotKeys`]: the per-instance state of the hot-key modes, and the check
//! that honours a policy's mode.

use std::fmt;
use std::sync::Arc;

use crate::clock::ManualClock;
use crate::store::{Forget, Store};
use crate::{Decision, Error, Key, Policy, Verdict};

use super::HotKey;
use super::lease::Leases;
use super::sample::Samples;
use super::state::{HotClock, Instance};

/// The state one instance keeps for the hot-key modes of its policies
/// ([`HotKey`]): its leases, its sampling counters, its turn among shards
/// and its clock. Clones share it.
#[derive(Clone)]
pub(crate) struct HotState {
    pub(crate) instance: Arc<Instance>,
    pub(crate) leases: Arc<Leases>,
    pub(crate) samples: Arc<Samples>,
}

impl HotState {
    fn with(clock: HotClock, store_time: bool) -> Self {
        Self {
            instance: Arc::new(Instance::new(clock, store_time)),
            leases: Arc::default(),
            samples: Arc::default(),
        }
    }
}

/// A store that honours the policies' hot-key modes ([`HotKey`]:
/// [`Policy::with_lease`], [`with_shards`](Policy::with_shards),
/// [`with_sampling`](Policy::with_sampling)) in front of the store it
/// wraps, keeping the state they need in this instance (leases, sampling
/// counters, the turn among shards). A policy without a mode goes to the
/// wrapped store as it would without it.
///
/// The [`Limiter`](crate::Limiter) and the Tower layer wrap their store in
/// one; a program asking a store directly wraps it itself. Clones share
/// the state; wrapping a `HotKeys` in another changes nothing.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{HotKeys, Key, Lease, MemoryStore, Policy, Rule, Store};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = HotKeys::new(MemoryStore::new());
/// let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(1))?])?
///     .with_lease(Lease::up_to(50)?)?;
/// let trending = Key::from("trending");
/// // The memory store decides in process: a lease would gain nothing.
/// assert!(store.check(&trending, &policy, 1).await?.allowed());
/// assert!(store.check(&trending, &policy, 1).await?.allowed());
/// assert!(!store.check(&trending, &policy, 1).await?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct HotKeys<S> {
    store: Arc<S>,
    state: HotState,
}

impl<S> Clone for HotKeys<S> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            state: self.state.clone(),
        }
    }
}

impl<S: Store> HotKeys<S> {
    /// `store` with the hot-key modes on the system clock.
    pub fn new(store: S) -> Self {
        Self::with(store, HotState::with(HotClock::System, false))
    }

    /// `store` with the hot-key modes on `clock`: when leases end, when a
    /// rate is measured.
    pub fn with_clock(store: S, clock: ManualClock) -> Self {
        Self::with(store, HotState::with(HotClock::Manual(clock), false))
    }

    /// As [`with_clock`](Self::with_clock), and the Redis store takes the
    /// leases at that clock's time instead of its own. For tests that
    /// count admissions per window exactly, only.
    #[cfg(feature = "test-util")]
    pub fn with_store_time(store: S, clock: ManualClock) -> Self {
        Self::with(store, HotState::with(HotClock::Manual(clock), true))
    }

    /// `store` with the state of `other`: its leases, counters and clock
    /// (one instance's state, whichever way its store is wrapped).
    pub fn sharing<T>(store: S, other: &HotKeys<T>) -> Self {
        Self::with(store, other.state.clone())
    }

    fn with(store: S, state: HotState) -> Self {
        // A key reset by another instance loses its lease and sample here.
        let (leases, samples) = (
            Arc::downgrade(&state.leases),
            Arc::downgrade(&state.samples),
        );
        if let Some(announcer) = store.as_shared_control() {
            announcer.on_reset(Box::new(move |forget| {
                let (Some(leases), Some(samples)) = (leases.upgrade(), samples.upgrade()) else {
                    return false;
                };
                match forget {
                    Forget::Key(key) => {
                        leases.forget(key);
                        samples.forget(key);
                    }
                    Forget::Everything => {
                        leases.clear();
                        samples.clear();
                    }
                }
                true
            }));
        }
        Self {
            store: Arc::new(store),
            state,
        }
    }

    /// The wrapped store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Checks a request of `cost` on `key`, honouring the policy's hot-key
    /// mode, saying who decided: a guarded store applies the policy's
    /// failure policy (or its own), also when a lease cannot be taken.
    async fn honour(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Verdict, Error> {
        let (hot, store) = (&self.state, &self.store);
        match policy.hot_key() {
            // A store that honours the modes itself (a `HotKeys`) decides.
            _ if store.honours_hot_keys() => super::verdict_of(&**store, key, policy, cost).await,
            None => super::verdict_of(&**store, key, policy, cost).await,
            Some(HotKey::Lease(lease)) if store.is_remote() && store.as_leases().is_some() => {
                let (instance, leases) = (&hot.instance, &hot.leases);
                super::lease::check(instance, leases, store, key, policy, lease, cost).await
            }
            Some(HotKey::Shard { shards }) => {
                super::shard::check(&hot.instance, store, key, policy, shards, cost).await
            }
            Some(HotKey::Sample { every }) => {
                let (instance, samples) = (&hot.instance, &hot.samples);
                super::sample::check(instance, samples, store, key, policy, every, cost).await
            }
            // In process a lease would gain nothing: the store decides at
            // once; a store that leases nothing decides each check itself.
            Some(_) => super::verdict_of(&**store, key, policy, cost).await,
        }
    }
}

#[path = "engine_capabilities.rs"]
mod capabilities;

impl<S> fmt::Debug for HotKeys<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HotKeys")
            .field("leased_keys", &self.state.leases.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{MemoryStore, Rule};

    /// Wrapping a `HotKeys` in another applies the modes once: a sampled
    /// policy decides the same sequence either way.
    #[tokio::test]
    async fn a_wrapped_hot_keys_applies_the_modes_once() {
        use crate::Capabilities;
        assert!(HotKeys::new(HotKeys::new(MemoryStore::new())).honours_hot_keys());
        let policy = Policy::sliding_log([Rule::new(10, Duration::from_secs(60)).unwrap()])
            .unwrap()
            .with_sampling(4)
            .unwrap();
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let once = HotKeys::with_clock(MemoryStore::with_clock(clock.clone()), clock.clone());
        let inner = HotKeys::with_clock(MemoryStore::with_clock(clock.clone()), clock.clone());
        let twice = HotKeys::with_clock(inner, clock.clone());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let key = Key::from("k");
        for _ in 0..40 {
            a.push(once.check(&key, &policy, 1).await.unwrap().allowed());
            b.push(twice.check(&key, &policy, 1).await.unwrap().allowed());
            tokio::task::yield_now().await;
        }
        assert_eq!(a, b);
        assert!(a.contains(&false), "the limit is reached: {a:?}");
    }
}
