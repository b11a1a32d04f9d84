//! Rate limiting for axum and Tower services: annotate handlers, add one
//! layer to the router.
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::{Router, routing::post};
//! use limiter_tower::{Limiter, MemoryStore, RateLimitLayer, rate_limit};
//!
//! #[rate_limit(rules = [(10, 60s), (20, 120s)], by = ip, prevent_duplicate)]
//! async fn create_post() -> &'static str {
//!     "created"
//! }
//!
//! let app: Router = Router::new()
//!     .route("/posts", post(create_post))
//!     .layer(RateLimitLayer::new(Limiter::new(MemoryStore::new())));
//! // Serve with the client address known, for `by = ip`:
//! // axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//! ```
//!
//! Over the limit a request gets `429 Too Many Requests` with `Retry-After`,
//! the `RateLimit-Policy` and `RateLimit` fields (one item per rule), and an
//! RFC 9457 `application/problem+json` body of type `quota-exceeded` (or the
//! handler's `message`). The handler does not run and the body is not read.
//! Allowed responses carry the `RateLimit` fields too (configurable).
//!
//! - [`RateLimitLayer`] goes on the router once: it holds the store
//!   ([`MemoryStore`] or [`RedisStore`]), the key prefix, how to find the
//!   client address (trusted proxies, the header they write:
//!   [`ClientIpSource`]; IPv6 grouping) and the user.
//! - `#[rate_limit(...)]` on a handler generates that handler's limit, a Tower
//!   layer, keyed `{prefix}:{identity}:{module}-{handler}`.
//! - [`LimitLayer`] is the same limit without the macro, for any route or service.
//!
//! # Feature flags
//! - `macros` (default): the `#[rate_limit]` attribute.
//! - `redis` (default): [`RedisStore`].

mod client_ip;
mod context;
mod key;
mod limit;
mod rate_limit;
mod response;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use client_ip::{ClientIpSource, DEFAULT_IPV6_PREFIX};
pub use ipnet::IpNet;
pub use key::{KeySource, Resolver};
pub use limit::{Limit, LimitLayer, ResponseFuture};
pub use limiter_core::*;
#[cfg(feature = "macros")]
pub use limiter_macros::rate_limit;
pub use rate_limit::{RateLimit, RateLimitFuture, RateLimitLayer};
pub use response::{QUOTA_EXCEEDED, RATELIMIT, RATELIMIT_POLICY};
