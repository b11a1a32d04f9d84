//! The per-route limit: one policy and one key source on a route, a handler
//! or any service. The `#[rate_limit]` attribute generates one per handler.

mod admission;
mod answer;
mod business_setters;
mod call;
mod checks;
pub(crate) mod counters;
mod detached;
mod future;
mod identity;
mod layer;
mod permit_body;
mod refund;
mod route;
mod service;

pub(crate) use admission::Checked;
pub use future::ResponseFuture;
pub use layer::LimitLayer;
pub(crate) use refund::Refund;
pub(crate) use route::RouteLimit;
pub use service::Limit;
