//! The regional store: one quota shared by several regions, each counting
//! locally and summing the others' counts only at tiers (the seed's tiered
//! counting). See [`RegionalStore`] for the scheme and its guarantees.
//!
//! - `tiers.rs`: the pure part (tiers, window mapping, a sync's plan);
//! - `store.rs`: the store and its decision; `sync.rs`: background syncs;
//! - `link.rs`: the calls to Redis; `scripts/`: the check and the merge;
//! - `breaker.rs`: a breaker per other region; `config.rs`, `region.rs`.

mod breaker;
mod config;
mod link;
mod region;
mod store;
mod sync;
mod tiers;

pub use config::{RegionalConfig, TierSize};
pub use region::{Region, RegionError};
pub use store::{RegionStats, RegionalStore};
