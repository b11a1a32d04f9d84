//! The per-route limit: one policy and one key source on a route, a handler
//! or any service. The `#[rate_limit]` attribute generates one per handler.

mod admission;
mod business_setters;
pub(crate) mod counters;
mod extended;
mod future;
mod layer;
mod permit_body;
mod route;
mod service;

pub use future::ResponseFuture;
pub use layer::LimitLayer;
pub use service::Limit;
