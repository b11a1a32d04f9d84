//! What the router-level layer hands to every per-route limit: the store, the
//! key prefix, and how to find clients.
//!
//! The hand-over is a thread-local set while the router layer calls and polls
//! what is below it, not a request extension, which would cost every request
//! an `Arc` clone, a box, a map insert and their frees.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use http::StatusCode;
use limiter_core::{Error, GuardConfig, Guarded, OnStoreError, Policy, Store, Verdict};

use crate::client_ip::ClientIp;
use crate::key::Resolver;

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A [`Store`] behind a pointer, so every route can reach it without knowing
/// its type; remote stores come guarded (deadline, breaker, failure policy).
pub(crate) trait DynStore: Send + Sync + 'static {
    /// Decides at once when the store can (see [`Store::try_check_now`]);
    /// `None`: await [`check_owned`](Self::check_owned).
    fn check_now(&self, key: &str, policy: &Policy, cost: u64) -> Option<Result<Verdict, Error>> {
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
}

/// A store used as it is: one that never fails (the memory store), or one
/// the application guarded itself ([`Store::is_guarded`]).
struct Direct<S>(S);

impl<S: Store> DynStore for Direct<S> {
    fn check_now(&self, key: &str, policy: &Policy, cost: u64) -> Option<Result<Verdict, Error>> {
        Some(self.0.try_check_now(key, policy, cost)?.map(Verdict::Store))
    }

    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Verdict, Error>> {
        Box::pin(async move { self.0.check_verdict(&key, &policy, cost, on_error).await })
    }
}

impl<S: Store> DynStore for Guarded<S> {
    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> BoxFuture<Result<Verdict, Error>> {
        Box::pin(async move { self.check_verdict(&key, &policy, cost, on_error).await })
    }
}

/// Builds the (guarded) store for a guard configuration.
pub(crate) type StoreBuilder = Arc<dyn Fn(GuardConfig) -> Arc<dyn DynStore> + Send + Sync>;

/// Guards a remote store with the layer's configuration, unless it guards
/// itself: one owner guards a store (a second guard would add a deadline, a
/// breaker and a deny cache, and replace the owner's failure policy).
pub(crate) fn store_builder<S: Store + Clone>(store: S) -> StoreBuilder {
    Arc::new(move |config| -> Arc<dyn DynStore> {
        if store.is_remote() && !store.is_guarded() {
            Arc::new(Guarded::new(store.clone(), config))
        } else {
            Arc::new(Direct(store.clone()))
        }
    })
}

/// Which headers responses carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderOptions {
    /// `RateLimit-Policy` and `RateLimit` on allowed responses (always on 429s).
    pub(crate) on_allowed: bool,
    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset` as well.
    pub(crate) legacy: bool,
}

#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) build_store: StoreBuilder,
    pub(crate) guard: GuardConfig,
    /// The failure policy set on the layer, for routes that set none.
    pub(crate) on_store_error: Option<OnStoreError>,
    pub(crate) prefix: Box<str>,
    pub(crate) client_ip: ClientIp,
    pub(crate) user: Option<Resolver>,
    pub(crate) headers: HeaderOptions,
    pub(crate) missing_identity: StatusCode,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("prefix", &self.prefix)
            .field("guard", &self.guard)
            .field("client_ip", &self.client_ip)
            .field("user", &self.user.as_ref().map(|_| ".."))
            .field("headers", &self.headers)
            .field("missing_identity", &self.missing_identity)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The context of the innermost [`RateLimitLayer`](crate::RateLimitLayer)
    /// calling or polling on this thread.
    static IN_SCOPE: Cell<Option<Arc<Context>>> = const { Cell::new(None) };
}

/// A router layer's context in scope on this thread, for the limits its
/// service calls or polls, until [`leave`](Self::leave) (or a panic) puts
/// back the scope around it: an outer router layer's, or none. The context
/// moves into the thread-local and back: no reference count changes.
pub(crate) struct Scope {
    outer: Option<Option<Arc<Context>>>,
}

impl Scope {
    pub(crate) fn enter(context: Arc<Context>) -> Self {
        Self {
            outer: Some(IN_SCOPE.replace(Some(context))),
        }
    }

    /// Ends the scope, handing the context back.
    pub(crate) fn leave(mut self) -> Option<Arc<Context>> {
        let outer = self.outer.take().flatten();
        IN_SCOPE.replace(outer)
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(outer) = self.outer.take() {
            IN_SCOPE.set(outer);
        }
    }
}

/// The context in scope, taken for one limit's check and put back when
/// dropped. The inner service must not be called meanwhile: the scope is
/// empty.
pub(crate) struct Current(Option<Arc<Context>>);

impl Current {
    pub(crate) fn take() -> Self {
        Self(IN_SCOPE.take())
    }

    pub(crate) fn context(&self) -> Option<&Context> {
        self.0.as_deref()
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        IN_SCOPE.set(self.0.take());
    }
}
