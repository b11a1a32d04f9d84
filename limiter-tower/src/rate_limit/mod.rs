//! The router-level layer: holds the store and the settings every limited
//! route shares, and hands them to the per-route limits.

mod layer;
mod service;

pub use layer::RateLimitLayer;
pub use service::{RateLimit, RateLimitFuture};
