//! Rate limiting for axum and Tower services: annotate handlers, add one
//! layer to the router.
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::{Router, routing::post};
//! use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};
//!
//! #[rate_limit(rules = [(10, 60s), (20, 120s)], by = ip, prevent_duplicate)]
//! async fn create_post() -> &'static str {
//!     "created"
//! }
//!
//! let app: Router = Router::new()
//!     .route("/posts", post(create_post))
//!     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
//! // Serve with the client address known, for `by = ip`:
//! // axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//! ```
//!
//! Over the limit a request gets `429 Too Many Requests` with `Retry-After`,
//! the `RateLimit-Policy` and `RateLimit` fields (one item per rule), and an
//! RFC 9457 `application/problem+json` body of type `quota-exceeded` (or the
//! handler's `message`). The handler does not run and the body is not read.
//! Allowed responses carry the `RateLimit` fields too (configurable). A gRPC
//! call (`content-type: application/grpc*`) gets a trailers-only response
//! instead: `grpc-status` 8 (`RESOURCE_EXHAUSTED`) with its retry time in
//! `grpc-retry-pushback-ms` and in a `google.rpc.RetryInfo`.
//!
//! - [`LimiterLayer`] goes on the router once: it holds the store
//!   ([`MemoryStore`] or [`RedisStore`]), the key prefix, how to find the
//!   client address (trusted proxies, the header they write:
//!   [`ClientIpSource`]; IPv6 grouping) and the user.
//! - `#[rate_limit(...)]` on a handler generates that handler's limit, keyed
//!   `{prefix}:{identity}:{module}-{handler}`.
//! - [`LimitLayer`] is the same limit without the macro, for any route or
//!   any Tower HTTP service (hyper, tonic): any request body, any response
//!   body.
//!
//! Limits can follow the business ([`LimitLayer::plans`],
//! [`LimitLayer::cost`], [`LimitLayer::concurrency`], [`LimitLayer::wait`],
//! allow lists and shadow mode, on both layers; the same as `#[rate_limit]`
//! arguments): a policy from the request's plan, changed at run time; a
//! cost from its head; clients and identities no limit holds; limits that
//! count but never deny; waiting for the retry time instead of a 429; at
//! most N requests in flight.
//!
//! ```
//! use std::time::Duration;
//! use axum::{Router, routing::post};
//! use limiter_tower::{ConcurrencyLimit, KeySource, LimitLayer, Limiter, LimiterLayer, MaxWait, MemoryStore};
//!
//! let exports = LimitLayer::concurrent("exports", ConcurrencyLimit::new(2)?, KeySource::ip())
//!     .wait(MaxWait::new(Duration::from_secs(2))?);
//! let app: Router = Router::new()
//!     .route("/exports", post(|| async { "exported" }).layer(exports))
//!     .layer(
//!         LimiterLayer::new(Limiter::new(MemoryStore::new()))
//!             .allow_ips(["10.20.0.0/16".parse()?])
//!             .shadow(false),
//!     );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A limit that cannot work as the application is put together (no
//! `LimiterLayer` above it, `by = ip` served without the peer address,
//! `by = user` without a user resolver) answers 500 and logs why at `error`;
//! in debug builds the body of the 500 names the fix.
//!
//! # Feature flags
//!
//! Read from `Cargo.toml`, so the list and its defaults are the crate's own.
#![doc = document_features::document_features!()]

mod client_ip;
mod context;
mod control;
mod key;
mod limit;
mod limiter_layer;
mod misconfigured;
mod options;
mod peer;
#[cfg(feature = "prometheus")]
mod prometheus;
mod response;
mod scope;
mod setters;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use client_ip::{ClientIpSource, DEFAULT_IPV6_PREFIX};
#[allow(deprecated)]
pub use control::OverrideHeld;
pub use control::{
    AttemptResponse, Control, DEFAULT_API_KEY_HEADER, LimitInfo, LimitState, Offender,
    OverrideInForce, OverrideState, Reporting, TopOffenders, UnknownLimit, WrittenRules,
    changes_need_the_store,
};
pub use ipnet::IpNet;
pub use key::{ClientAddress, KeySource, ListedIdentity, Resolver};
pub use limit::{Limit, LimitLayer, ResponseFuture};
pub use limiter_core::{
    Acquired, Algorithm, Attempt, Capabilities, Change, ControlTables, HotKeys, KeyState, Lease,
    Leases, Permits, Receipt, Refused, SharedControl, Verdict,
};
pub use limiter_core::{
    BlockOrigin, DEFAULT_MAX_PENALTY_BLOCKS, ListedBlock, MAX_BLOCKS, MAX_BLOCKS_PAGE, TopDenied,
};
pub use limiter_core::{
    BreakerConfig, Clock, ConcurrencyLimit, ConfigError, DEFAULT_DEADLINE, DEFAULT_MAX_WAITERS,
    Decision, Error, GuardConfig, Guarded, Identity, IdentityKind, Limiter, ManualClock, MaxWait,
    MemoryStore, OnStoreError, Penalty, Plan, Plans, Policy, Rate, Rule, RuleStatus, Store,
    SystemClock, Waiters,
};
pub use limiter_core::{MAX_OVERRIDE, MAX_OVERRIDES, Override, OverrideMode};
pub use limiter_layer::{LimiterFuture, LimiterLayer, LimiterService};
#[allow(deprecated)]
pub use limiter_layer::{RateLimit, RateLimitFuture, RateLimitLayer};
#[cfg(feature = "macros")]
pub use limiter_macros::rate_limit;
#[cfg(feature = "redis")]
pub use limiter_redis::{RedisConfig, RedisStore};
#[cfg(feature = "regional")]
pub use limiter_regional::{
    KnownCounts, Region, RegionError, RegionStats, RegionalConfig, RegionalStore,
    RegionsNotConfirmed,
};
pub use peer::from_peer;
#[cfg(feature = "prometheus")]
pub use prometheus::prometheus_buckets;
pub use response::{
    BLOCKED, DENIED, QUOTA_EXCEEDED, RATELIMIT, RATELIMIT_POLICY, too_many_requests,
};
