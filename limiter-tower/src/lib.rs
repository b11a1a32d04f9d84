//! Rate limiting for axum and Tower services, built on `limiter-core`.
//!
//! The layer and the `#[rate_limit]` macro are being built; for now this crate
//! re-exports the core API.

pub use limiter_core::*;
