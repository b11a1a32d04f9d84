//! The per-route limit: one policy and one key source on a route, a handler
//! or any service. The `#[rate_limit]` attribute generates one per handler.

mod counters;
mod future;
mod layer;
mod route;
mod service;

pub use future::ResponseFuture;
pub use layer::LimitLayer;
pub use service::Limit;
