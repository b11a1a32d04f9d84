//! The concurrency limit: at most `max` requests of a key in flight at once.
//!
//! A request in flight holds a [`Permit`] taken from the store: on the Redis
//! store, an entry in a sorted set of the key, scored by when its lease
//! ends. The permit is given back when it is dropped (the response body
//! finished or dropped, the request cancelled); while it is held, a task
//! renews its lease, so the permits of an instance that dies expire when
//! their lease ends instead of being held forever.

pub(crate) mod permit;

pub use limiter_model::ConcurrencyLimit;
pub use permit::{Acquired, Permit};

#[cfg(test)]
mod permit_tests;
