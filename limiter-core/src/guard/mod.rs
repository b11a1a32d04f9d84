//! What happens when the shared store is slow or down: a deadline on every
//! call, a circuit breaker, a failure policy, and a local deny cache.

mod breaker;
mod deny_cache;
mod domains;
mod guarded;

pub use breaker::{BreakerConfig, BreakerState};
pub use deny_cache::DEFAULT_DENY_CACHE_CAPACITY;
pub use guarded::{DEFAULT_DEADLINE, GuardConfig, Guarded};
