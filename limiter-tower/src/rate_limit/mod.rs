//! The router-level layer: holds the store and the settings every limited
//! route shares, and hands them to the per-route limits.

mod layer;
mod service;

pub use layer::RateLimitLayer;
pub use service::RateLimit;

/// The context in a request's extensions: private, so no one else can forge it.
#[derive(Debug, Clone)]
pub(crate) struct ContextExt(pub(crate) std::sync::Arc<crate::context::Context>);
