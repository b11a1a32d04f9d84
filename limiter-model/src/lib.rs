//! The model of limiter: rules, rates, policies and their algorithms,
//! decisions and errors, with no runtime and no dependency but `thiserror`.
//!
//! Applications use it through `limiter-core` (which re-exports all of it)
//! or `limiter-tower`; `#[rate_limit]` validates its arguments with it when
//! it compiles, through the same functions the runtime uses, so a rule the
//! attribute accepts is one the runtime accepts. The algorithms here are
//! pure: a state, a time and a cost in, a decision out; the stores of
//! `limiter-core` and `limiter-redis` keep the states.

// The algorithms whole, for limiter-core's memory store; a store crate
// builds on the parts `backend` names.
#[doc(hidden)]
pub mod algorithm;
pub mod backend;
mod concurrency;
mod decision;
mod duration;
mod error;
pub mod hot;
mod max_wait;
mod on_store_error;
mod penalty;
mod policy;
pub mod refund;
mod rule;
mod span;
mod verdict;

pub use concurrency::ConcurrencyLimit;
pub use decision::{Decider, Decision, RuleStatus};
pub use duration::{DURATION_UNITS, duration_unit, parse_duration};
pub use error::{BackendError, ConfigError, Error};
pub use hot::{DEFAULT_LEASE_TTL, HotKey, Lease};
pub use max_wait::MaxWait;
pub use on_store_error::OnStoreError;
pub use penalty::{MAX_PENALTY_DENIALS, MAX_PENALTY_STEPS, Penalty, PenaltyState};
pub use policy::{Algorithm, DEFAULT_DUPLICATE_WINDOW, MAX_RULES, Policy};
pub use refund::Receipt;
pub use rule::{MAX_WINDOW, Rate, Rule};
pub use span::Span;
pub use verdict::Verdict;
