//! The store as every check of a limit reaches it: behind a pointer, so a
//! check needs not know its type; honouring the policies' hot-key modes;
//! a remote store guarded (deadline, breaker, failure policy) once.

use std::sync::Arc;

use crate::{
    Acquired, Capabilities, ConcurrencyLimit, ControlTables, Decision, Error, GuardConfig, Guarded,
    HotKeys, Key, OnStoreError, Policy, Store, Verdict, required,
};

/// The capability a limit counted by outcome needs, as its absence is named.
pub const COUNTING: &str = "counting by outcome";

/// A boxed, sendable future.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A [`Store`] behind a pointer, so every route can reach it without knowing
/// its type; remote stores come guarded (deadline, breaker, failure policy).
/// Only the hot path is erased here: the rest is the store's own
/// [`Capabilities`].
pub trait LimitStore: Send + Sync + 'static {
    /// Decides at once when the store can (see [`Store::try_check_now`]);
    /// `None`: await [`check_owned`](Self::check_owned).
    fn check_now(&self, key: &Key, policy: &Policy, cost: u64) -> Option<Result<Decision, Error>>;

    /// Checks `key`, and gives it back with the verdict (a limit's
    /// denial counts the identity it names among its offenders).
    fn check_owned(
        self: Arc<Self>,
        key: Key,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<(Result<Verdict, Error>, Key)>;

    /// Takes a permit of `limit` on `key` (see [`Permits`](crate::Permits));
    /// a guarded store decides by `on_error` when it fails (its own
    /// failure policy when `None`).
    fn acquire_permit_owned(
        self: Arc<Self>,
        key: String,
        limit: ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Acquired, Error>>;

    /// `policy`, saying `on_error` when the store's guard would not apply
    /// it unasked: what a check counted by outcome takes to the store.
    fn under(&self, policy: &Arc<Policy>, on_error: Option<OnStoreError>) -> Arc<Policy>;

    /// What the store does besides checks, for the layer's blocks and
    /// penalties and for the control handles.
    fn capabilities(&self) -> &dyn Capabilities;
}

/// The store the layer holds, honouring the policies' hot-key modes: the
/// application's (one that never fails, such as the memory store, or one
/// it guarded itself), or the layer's guard of it.
struct LayerStore<S> {
    store: HotKeys<S>,
    /// The failure policy the store applies to a policy that names none.
    applies: Applies,
}

/// What failure policy a held store applies to a policy that names none.
#[derive(Clone, Copy)]
enum Applies {
    /// None is needed: the store never fails (it is in process).
    Nothing,
    /// The layer's guard's.
    Guard(OnStoreError),
    /// The application's own guard's, which the layer does not know.
    Unknown,
}

impl<S> LayerStore<S> {
    /// The failure policy a call must name for the store to decide by
    /// `wanted` (the route's or the router layer's) when it fails, given
    /// the one its policy or limit names already (`own`): `None` when the
    /// store would decide so unasked, or never fails.
    fn must_name(
        &self,
        own: Option<OnStoreError>,
        wanted: Option<OnStoreError>,
    ) -> Option<OnStoreError> {
        let wanted = wanted?;
        let applied = match self.applies {
            Applies::Nothing => return None,
            Applies::Guard(guard) => Some(own.unwrap_or(guard)),
            Applies::Unknown => own,
        };
        (applied != Some(wanted)).then_some(wanted)
    }
}

impl<S: Store> LimitStore for LayerStore<S> {
    #[inline]
    fn check_now(&self, key: &Key, policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        self.store.try_check_now(key, policy, cost)
    }

    fn check_owned(
        self: Arc<Self>,
        key: Key,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<(Result<Verdict, Error>, Key)> {
        Box::pin(async move {
            // The guard applies the failure policy the policy names.
            let policy = self.under(&policy, on_error);
            // A policy without a mode goes to the store directly.
            let checked = if policy.hot_key().is_none() {
                self.store.store().check(&key, &policy, cost).await
            } else {
                self.store.check(&key, &policy, cost).await
            };
            (Verdict::of(checked), key)
        })
    }

    fn acquire_permit_owned(
        self: Arc<Self>,
        key: String,
        limit: ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Acquired, Error>> {
        Box::pin(async move {
            let limit = match self.must_name(limit.on_store_error(), on_error) {
                Some(on_error) => limit.with_on_store_error(on_error),
                None => limit,
            };
            // A store that keeps no permits says so (see `misconfigured`).
            required(self.store.as_permits(), "concurrency limits")?
                .acquire_permit(&key, &limit)
                .await
        })
    }

    fn under(&self, policy: &Arc<Policy>, on_error: Option<OnStoreError>) -> Arc<Policy> {
        match self.must_name(policy.on_store_error(), on_error) {
            Some(on_error) => Arc::new((**policy).clone().with_on_store_error(on_error)),
            None => Arc::clone(policy),
        }
    }

    fn capabilities(&self) -> &dyn Capabilities {
        &self.store
    }
}

/// `store` as its owner made it, guarded or not: the programmatic
/// handle's, whose failure policy is the store's own.
pub(crate) fn unguarded<S: Store>(store: HotKeys<S>) -> Arc<dyn LimitStore> {
    Arc::new(LayerStore {
        store,
        applies: Applies::Unknown,
    })
}

/// Builds the (guarded) store for a guard configuration.
pub type StoreBuilder = Arc<dyn Fn(GuardConfig) -> Arc<dyn LimitStore> + Send + Sync>;

/// Guards a remote store with the layer's configuration, unless it guards
/// itself: one owner guards a store (a second guard would add a deadline, a
/// breaker and a deny cache, and replace the owner's failure policy). Every
/// store built shares the state of one [`HotKeys`].
pub fn store_builder<S: Store + Clone>(store: S) -> StoreBuilder {
    let hot = HotKeys::new(store);
    Arc::new(move |config| -> Arc<dyn LimitStore> {
        let store = hot.store().clone();
        if !store.is_remote() {
            let store = HotKeys::sharing(store, &hot);
            Arc::new(LayerStore {
                store,
                applies: Applies::Nothing,
            })
        } else if !store.is_guarded() {
            let applies = Applies::Guard(config.on_store_error);
            let store = HotKeys::sharing(Guarded::new(store, config), &hot);
            Arc::new(LayerStore { store, applies })
        } else {
            let store = HotKeys::sharing(store, &hot);
            Arc::new(LayerStore {
                store,
                applies: Applies::Unknown,
            })
        }
    })
}

/// The store's shared control tables (blocks, plans, overrides), which
/// every request reads without a call; `None` when the store keeps none.
pub fn tables_of(store: &dyn LimitStore) -> Option<ControlTables> {
    let shared = store.capabilities().as_shared_control()?;
    Some(shared.tables().clone())
}
