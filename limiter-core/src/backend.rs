//! What a store crate builds on: a policy's exact parameters, the parts of
//! the algorithms a store that runs them elsewhere (in Lua, in SQL) shares
//! with the memory store, and the constructors of the answers a store
//! gives.
//!
//! Applications need none of this. A store keeps its decisions identical
//! to the memory store's for identical times by building them with these
//! functions rather than by restating their arithmetic:
//! - [`Kind`] and [`BucketParams`] ([`Policy::kind`](crate::Policy::kind))
//!   give a policy's algorithm in exact integer units;
//! - [`Decision::new`](crate::Decision::new) and
//!   [`Decision::single`](crate::Decision::single) build a decision from
//!   per-rule [`RuleStatus`](crate::RuleStatus)es;
//!   [`sliding_log::decide`] builds the sliding log's from the counts a
//!   store read;
//! - [`meter::check`], [`fixed_window::check`] and [`sliding_window::check`]
//!   decide on a state a store read (the Redis store answers a batch of
//!   one key's requests by replaying them on the state its script read);
//! - [`Permit::new`](crate::Permit::new) and [`permit_decision`] answer a
//!   concurrency limit; [`LeaseGrant::new`](crate::hot::LeaseGrant::new)
//!   answers a lease.

pub use crate::concurrency::permit::decision as permit_decision;
pub use limiter_model::backend::*;
