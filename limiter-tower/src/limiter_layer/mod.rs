//! The router-level layer: holds the store and the settings every limited
//! route shares, and hands them to the per-route limits.

mod layer;
mod service;

pub use layer::LimiterLayer;
pub use service::{LimiterFuture, LimiterService};

/// The former name of [`LimiterLayer`].
#[deprecated(since = "0.1.0", note = "renamed `LimiterLayer`")]
pub type RateLimitLayer = LimiterLayer;

/// The former name of [`LimiterService`].
#[deprecated(since = "0.1.0", note = "renamed `LimiterService`")]
pub type RateLimit<S> = LimiterService<S>;

/// The former name of [`LimiterFuture`].
#[deprecated(since = "0.1.0", note = "renamed `LimiterFuture`")]
pub type RateLimitFuture<F> = LimiterFuture<F>;
