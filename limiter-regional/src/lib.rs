//! The regional store: one quota shared by several regions, each deciding
//! locally within its lease of each window's quota, and asking the others
//! for their spare shares when its demand outruns it. See
//! [`RegionalStore`] for the scheme and its guarantees.
//!
//! - `shares.rs`: each region's share of a quota;
//! - `store.rs`: the store; `check.rs`: a decision from the script's reply;
//! - `registry.rs`: which asks wait or run; `ask.rs`: one ask;
//! - `counts.rs`: peeks, resets and refunds, in every region;
//! - `liveness.rs`: heartbeats, and who takes the share of a region cut off;
//! - `link.rs`: the calls to Redis; `scripts/`: the check, the give, the
//!   credit and the adjustments;
//! - `breaker.rs`: a breaker per other region; `stats.rs`, `config.rs`,
//!   `region.rs`;
//! - `control.rs`: blocks and penalties in every region, through a Redis
//!   store per region; `relay.rs`: what goes to the other regions in the
//!   background; `capabilities.rs`: what the store answers besides checks.

mod ask;
mod breaker;
mod capabilities;
mod check;
mod config;
mod control;
mod counts;
mod heartbeat;
mod inner;
mod link;
mod liveness;
mod outbox;
mod region;
mod registry;
mod relay;
mod shares;
mod stats;
mod store;

pub use config::RegionalConfig;
pub use control::RegionsNotConfirmed;
pub use counts::KnownCounts;
pub use outbox::{MAX_WAITING, REDELIVER_EVERY};
pub use region::{Region, RegionError};
pub use relay::MAX_RELAYS_IN_FLIGHT;
pub use stats::RegionStats;
pub use store::RegionalStore;
