//! What the router-level layer hands to every per-route limit through the
//! request's extensions: the store, the key prefix, and how to find clients.

use std::fmt;
use std::sync::Arc;

use http::StatusCode;
use limiter_core::{Decision, Error, Policy, Store};

use crate::client_ip::ClientIp;
use crate::key::Resolver;

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A [`Store`] behind a pointer, so every route can reach it without knowing its type.
pub(crate) trait DynStore: Send + Sync + 'static {
    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
    ) -> BoxFuture<Result<Decision, Error>>;
}

impl<S: Store> DynStore for S {
    fn check_owned(
        self: Arc<Self>,
        key: String,
        policy: Arc<Policy>,
        cost: u64,
    ) -> BoxFuture<Result<Decision, Error>> {
        Box::pin(async move { self.check(&key, &policy, cost).await })
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

#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) store: Arc<dyn DynStore>,
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
            .field("client_ip", &self.client_ip)
            .field("user", &self.user.as_ref().map(|_| ".."))
            .field("headers", &self.headers)
            .field("missing_identity", &self.missing_identity)
            .finish_non_exhaustive()
    }
}
