//! The regional store: one quota shared by several regions, each counting
//! locally and summing the others' counts only at tiers (the seed's tiered
//! counting). See [`RegionalStore`] for the scheme and its guarantees.
//!
//! - `tiers.rs`: the pure part (tiers, window mapping, a sync's plan),
//!   and `model.rs`, a model of the scheme for property tests;
//! - `store.rs`: the store; `check.rs`: a decision from the script's reply;
//! - `registry.rs`: which syncs wait or run; `sync.rs`: one sync;
//! - `link.rs`: the calls to Redis; `scripts/`: the check and the merge;
//! - `breaker.rs`: a breaker per other region; `stats.rs`, `config.rs`,
//!   `region.rs`;
//! - `control.rs`: blocks and penalties in every region, through a Redis
//!   store per region; `relay.rs`: what goes to the other regions in the
//!   background; `capabilities.rs`: what the store answers besides checks.

mod breaker;
mod capabilities;
mod check;
mod config;
mod control;
mod link;
#[cfg(test)]
mod model;
mod region;
mod registry;
mod relay;
mod stats;
mod store;
mod sync;
mod tiers;

pub use config::{RegionalConfig, TierSize};
pub use control::RegionsNotConfirmed;
pub use region::{Region, RegionError};
pub use relay::MAX_RELAYS_IN_FLIGHT;
pub use stats::RegionStats;
pub use store::RegionalStore;
