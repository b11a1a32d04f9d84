//! What the router-level layer holds for every limit below it: the store,
//! the key prefix, how to find clients and users, and which headers to send.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use limiter_core::{
    Acquired, BlockOrigin, ConcurrencyLimit, Decision, Error, GuardConfig, Guarded, HotKeys,
    OnStoreError, Policy, Receipt, Store, Verdict, Waiters, ask,
};

use crate::business::Common;
use crate::client_ip::ClientIp;
use crate::key::Resolver;

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A [`Store`] behind a pointer, so every route can reach it without knowing
/// its type; remote stores come guarded (deadline, breaker, failure policy).
pub(crate) trait DynStore: Send + Sync + 'static {
    /// Decides at once when the store can (see [`Store::try_check_now`]);
    /// `None`: await [`check_owned`](Self::check_owned).
    fn check_now(&self, key: &str, policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        let _ = (key, policy, cost);
        None
    }

    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Verdict, Error>>;

    /// Takes a permit of `limit` on `key` (see [`limiter_core::Permits`]);
    /// a guarded store decides by `on_error` when it fails.
    fn acquire_permit_owned(
        self: Arc<Self>,
        key: String,
        limit: ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Acquired, Error>>;

    /// The store's handles on its state, for the layer's blocks and
    /// penalties and for [`Control`](crate::Control).
    fn control(&self) -> &dyn DynControl;
}

/// A store used as it is (one that never fails, such as the memory store,
/// or one the application guarded itself), honouring the policies' hot-key
/// modes.
struct AsGiven<S>(HotKeys<S>);

impl<S: Store> DynStore for AsGiven<S> {
    #[inline]
    fn check_now(&self, key: &str, policy: &Policy, cost: u64) -> Option<Result<Decision, Error>> {
        self.0.try_check_now(key, policy, cost)
    }

    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Verdict, Error>> {
        Box::pin(async move { self.0.verdict(&key, &policy, cost, on_error).await })
    }

    fn acquire_permit_owned(
        self: Arc<Self>,
        key: String,
        limit: ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Acquired, Error>> {
        Box::pin(async move { permit(self.0.store(), &key, &limit, on_error).await })
    }

    fn control(&self) -> &dyn DynControl {
        &self.0
    }
}

/// A store the layer guards itself, honouring the policies' hot-key modes
/// in front of the guard; a check of a policy without a mode goes to the
/// guard directly, its future stored in the one box of the call.
struct LayerGuarded<S>(HotKeys<Guarded<S>>);

impl<S: Store> DynStore for LayerGuarded<S> {
    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Verdict, Error>> {
        Box::pin(async move {
            if policy.hot_key().is_some() {
                return self.0.verdict(&key, &policy, cost, on_error).await;
            }
            let guarded = self.0.store();
            let on_error = on_error.unwrap_or(guarded.config().on_store_error);
            guarded.check_with(&key, &policy, cost, on_error).await
        })
    }

    fn acquire_permit_owned(
        self: Arc<Self>,
        key: String,
        limit: ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Acquired, Error>> {
        Box::pin(async move { permit(self.0.store(), &key, &limit, on_error).await })
    }

    fn control(&self) -> &dyn DynControl {
        &self.0
    }
}

/// A boxed, sendable future borrowing its store.
pub(crate) type BoxRef<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What a store does besides checks, with its type not named: read a key,
/// reset it, block, count penalties, keep plans. Implemented once, for the
/// store the layer holds (a [`HotKeys`], guarded or not); a store without
/// a capability answers [`Error::Unsupported`].
pub(crate) trait DynControl: Send + Sync {
    /// What a check of `key` would answer now (see [`limiter_core::Peek`]).
    fn peek<'a>(&'a self, key: &'a str, policy: &'a Policy) -> BoxRef<'a, Result<Decision, Error>>;
    /// Forgets `key`'s state (see [`limiter_core::Reset`]).
    fn reset<'a>(&'a self, key: &'a str, policy: &'a Policy) -> BoxRef<'a, Result<(), Error>>;
    /// How long `key` stays blocked, as this instance knows it.
    fn blocked(&self, key: &str) -> Option<Duration>;
    /// The list [`blocked`](Self::blocked) reads, when the store keeps one.
    fn block_list(&self) -> Option<Arc<limiter_core::BlockList>>;
    /// Whether the store blocks keys at all.
    fn has_blocks(&self) -> bool;
    /// Blocks `key` for `duration`, a block of `origin`, on every instance.
    fn block<'a>(
        &'a self,
        key: &'a str,
        duration: Duration,
        origin: BlockOrigin,
    ) -> BoxRef<'a, Result<(), Error>>;
    /// Lifts `key`'s block, on every instance.
    fn unblock<'a>(&'a self, key: &'a str) -> BoxRef<'a, Result<(), Error>>;
    /// Counts a denial under `key` by `penalty`; the block it earns.
    fn penalize<'a>(
        &'a self,
        key: &'a str,
        penalty: &'a limiter_core::Penalty,
    ) -> BoxRef<'a, Result<Option<Duration>, Error>>;
    /// Checks a request counted by outcome (see [`limiter_core::Refunds`]);
    /// a guarded store decides by `on_error` when it fails.
    fn check_refundable<'a>(
        &'a self,
        key: &'a str,
        policy: &'a Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxRef<'a, Result<(Verdict, Option<Receipt>), Error>>;
    /// Gives back what `receipt` recorded on `key`.
    fn refund<'a>(
        &'a self,
        key: &'a str,
        policy: &'a Policy,
        receipt: &'a Receipt,
    ) -> BoxRef<'a, Result<(), Error>>;
    /// Gives `key` the plan `plan` (`None`: the default), on every instance.
    fn assign<'a>(&'a self, key: &'a str, plan: Option<&'a str>) -> BoxRef<'a, Result<(), Error>>;
    /// The plan `key` has, as this instance knows it.
    fn assigned(&self, key: &str) -> Option<Arc<str>>;
    /// How many keys have a plan.
    fn assigned_count(&self) -> usize;
}

/// A capability the store lacks, as an answer.
fn unsupported<'a, T: Send + 'a>(what: &'static str) -> BoxRef<'a, Result<T, Error>> {
    Box::pin(async move { Err(Error::Unsupported(what)) })
}

impl<T: Store> DynControl for HotKeys<T> {
    fn peek<'a>(&'a self, key: &'a str, policy: &'a Policy) -> BoxRef<'a, Result<Decision, Error>> {
        ask::peek(self, key, policy, policy.cost())
            .unwrap_or_else(|| unsupported("reading a key without counting"))
    }

    fn reset<'a>(&'a self, key: &'a str, policy: &'a Policy) -> BoxRef<'a, Result<(), Error>> {
        ask::reset(self, key, policy).unwrap_or_else(|| unsupported("resetting a key"))
    }

    #[inline]
    fn blocked(&self, key: &str) -> Option<Duration> {
        Self::CAPABILITIES.blocked(self, key)
    }

    fn block_list(&self) -> Option<Arc<limiter_core::BlockList>> {
        Self::CAPABILITIES.block_list(self)
    }

    fn has_blocks(&self) -> bool {
        Self::CAPABILITIES.has_blocks()
    }

    fn block<'a>(
        &'a self,
        key: &'a str,
        duration: Duration,
        origin: BlockOrigin,
    ) -> BoxRef<'a, Result<(), Error>> {
        ask::block(self, key, duration, origin).unwrap_or_else(|| unsupported("blocks"))
    }

    fn unblock<'a>(&'a self, key: &'a str) -> BoxRef<'a, Result<(), Error>> {
        ask::unblock(self, key).unwrap_or_else(|| unsupported("blocks"))
    }

    fn penalize<'a>(
        &'a self,
        key: &'a str,
        penalty: &'a limiter_core::Penalty,
    ) -> BoxRef<'a, Result<Option<Duration>, Error>> {
        ask::penalize(self, key, penalty).unwrap_or_else(|| unsupported("penalties"))
    }

    fn check_refundable<'a>(
        &'a self,
        key: &'a str,
        policy: &'a Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxRef<'a, Result<(Verdict, Option<Receipt>), Error>> {
        ask::check_refundable(self, key, policy, cost, on_error)
            .unwrap_or_else(|| unsupported("counting by outcome"))
    }

    fn refund<'a>(
        &'a self,
        key: &'a str,
        policy: &'a Policy,
        receipt: &'a Receipt,
    ) -> BoxRef<'a, Result<(), Error>> {
        ask::refund(self, key, policy, receipt)
            .unwrap_or_else(|| unsupported("counting by outcome"))
    }

    fn assign<'a>(&'a self, key: &'a str, plan: Option<&'a str>) -> BoxRef<'a, Result<(), Error>> {
        ask::assign_plan(self, key, plan).unwrap_or_else(|| unsupported("plan assignments"))
    }

    fn assigned(&self, key: &str) -> Option<Arc<str>> {
        Self::CAPABILITIES.assigned_plan(self, key)
    }

    fn assigned_count(&self) -> usize {
        Self::CAPABILITIES.assigned_plans(self)
    }
}

/// A permit of `store`, whose type is not named here: a store that keeps
/// no permits says so (see `misconfigured`).
async fn permit<S: Store>(
    store: &S,
    key: &str,
    limit: &ConcurrencyLimit,
    on_error: Option<OnStoreError>,
) -> Result<Acquired, Error> {
    match ask::permit(store, key, limit, on_error) {
        Some(permit) => permit.await,
        None => Err(Error::Unsupported("concurrency limits")),
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
        if S::CAPABILITIES.is_remote() && !S::CAPABILITIES.is_guarded() {
            let guarded = Guarded::new(store, config);
            Arc::new(LayerGuarded(HotKeys::sharing(guarded, &hot)))
        } else {
            Arc::new(AsGiven(HotKeys::sharing(store, &hot)))
        }
    })
}

/// How a request's block is looked up: not at all (the store blocks
/// nothing), in the store's list once it holds blocks (an empty list costs
/// one load), or by asking the store each time (it keeps no list).
#[derive(Clone)]
pub(crate) enum BlockCheck {
    None,
    List(Arc<limiter_core::BlockList>),
    Ask,
}

impl BlockCheck {
    pub(crate) fn of(store: &dyn DynStore) -> Self {
        let control = store.control();
        match control.block_list() {
            Some(list) => Self::List(list),
            None if control.has_blocks() => Self::Ask,
            None => Self::None,
        }
    }
}

/// Which headers responses carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderOptions {
    /// `RateLimit-Policy` and `RateLimit` on allowed responses (always on 429s).
    pub(crate) on_allowed: bool,
    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset` as well.
    pub(crate) legacy: bool,
}

/// The router layer's settings, shared by every limit below it.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) store: Arc<dyn DynStore>,
    /// How a request's block is looked up.
    pub(crate) blocks: BlockCheck,
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
    pub(crate) business: Option<Box<Common>>,
    /// The queues of requests waiting for their retry time.
    pub(crate) waiters: Waiters,
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
            .field("business", &self.business)
            .field("waiters", &self.waiters)
            .finish_non_exhaustive()
    }
}
