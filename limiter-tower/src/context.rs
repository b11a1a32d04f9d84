//! What the router-level layer holds for every limit below it: the store,
//! the key prefix, how to find clients and users, and which headers to send.

use std::fmt;
use std::sync::{Arc, Weak};

use http::StatusCode;
use limiter_core::{
    Acquired, Capabilities, ConcurrencyLimit, ControlTables, Decision, Error, GuardConfig, Guarded,
    HotKeys, Identity, Key, OnStoreError, Policy, Store, Verdict, Waiters, required,
};

use crate::client_ip::ClientIp;
use crate::key::Resolver;
use crate::offenders::{Offenders, board};
use crate::options::CommonOptions;
use crate::response::HeaderOptions;

/// The capability a limit counted by outcome needs, as its absence is named.
pub(crate) const COUNTING: &str = "counting by outcome";

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A [`Store`] behind a pointer, so every route can reach it without knowing
/// its type; remote stores come guarded (deadline, breaker, failure policy).
/// Only the hot path is erased here: the rest is the store's own
/// [`Capabilities`].
pub(crate) trait DynStore: Send + Sync + 'static {
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

    /// Takes a permit of `limit` on `key` (see [`limiter_core::Permits`]);
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
    /// penalties and for [`Control`](crate::Control).
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

impl<S: Store> DynStore for LayerStore<S> {
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

/// Builds the (guarded) store for a guard configuration.
pub(crate) type StoreBuilder = Arc<dyn Fn(GuardConfig) -> Arc<dyn DynStore> + Send + Sync>;

/// Guards a remote store with the layer's configuration, unless it guards
/// itself: one owner guards a store (a second guard would add a deadline, a
/// breaker and a deny cache, and replace the owner's failure policy). Every
/// store built shares the state of one [`HotKeys`].
pub(crate) fn store_builder<S: Store + Clone>(store: S) -> StoreBuilder {
    let hot = HotKeys::new(store);
    Arc::new(move |config| -> Arc<dyn DynStore> {
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
pub(crate) fn tables_of(store: &dyn DynStore) -> Option<ControlTables> {
    let shared = store.capabilities().as_shared_control()?;
    Some(shared.tables().clone())
}

/// The router layer's settings, shared by every limit below it.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) store: Arc<dyn DynStore>,
    /// The store's blocks, plans and overrides, read by every request.
    pub(crate) tables: Option<ControlTables>,
    pub(crate) build_store: StoreBuilder,
    pub(crate) guard: GuardConfig,
    /// The failure policy set on the layer, for routes that set none.
    pub(crate) on_store_error: Option<OnStoreError>,
    /// The key prefix followed by `:`, as every key starts.
    pub(crate) key_start: Box<str>,
    pub(crate) client_ip: ClientIp,
    pub(crate) user: Option<Resolver>,
    pub(crate) headers: HeaderOptions,
    pub(crate) missing_identity: StatusCode,
    /// Allow lists, shadow mode and waiting for every limit below: `None`
    /// when none is configured.
    pub(crate) options: Option<Box<CommonOptions>>,
    /// The queues of requests waiting for their retry time.
    pub(crate) waiters: Waiters,
    /// The identities each limit below denied most, on this instance:
    /// shared by the layer's clones and its [`Control`](crate::Control).
    pub(crate) offenders: Arc<Offenders>,
}

impl Context {
    /// Counts a denial of `identity` by the limit `limit` among its top
    /// offenders, and starts publishing them (once, when a runtime runs).
    pub(crate) fn record_denial(&self, limit: &str, identity: &Identity) {
        self.offenders.record(limit, identity);
        if self.offenders.starts_publishing() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(publish_offenders(
                    Arc::downgrade(&self.offenders),
                    Arc::clone(&self.store),
                    self.key_start.clone(),
                ))),
                Err(_) => self.offenders.stopped_publishing(),
            }
        }
    }
}

/// Publishes each limit's counts through `store` every period, until the
/// layer is gone or the store keeps no reports; a failed publication is
/// logged and tried again the next period.
async fn publish_offenders(
    offenders: Weak<Offenders>,
    store: Arc<dyn DynStore>,
    key_start: Box<str>,
) {
    let Some(every) = offenders.upgrade().map(|o| o.every()) else {
        return;
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(live) = offenders.upgrade() else {
            return;
        };
        let (instance, ttl, reports) = (live.instance(), live.ttl(), live.reports());
        drop(live);
        let Some(shared) = store.capabilities().as_shared_control() else {
            return;
        };
        // A limit that denied nobody for two sketch periods has nothing to
        // say; what it published last is read no longer than its time.
        for (limit, report) in reports.into_iter().filter(|(_, r)| r.counted > 0) {
            let board = board(&key_start, &limit);
            match (shared.publish_report(&board, &instance, &report.to_text(), ttl)).await {
                Ok(()) => {}
                Err(Error::Unsupported(_)) => return,
                Err(error) => {
                    tracing::debug!(%error, limit = &*limit, "top offenders not published")
                }
            }
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("key_start", &self.key_start)
            .field("guard", &self.guard)
            .field("client_ip", &self.client_ip)
            .field("user", &self.user.as_ref().map(|_| ".."))
            .field("headers", &self.headers)
            .field("missing_identity", &self.missing_identity)
            .field("options", &self.options)
            .field("waiters", &self.waiters)
            .finish_non_exhaustive()
    }
}
