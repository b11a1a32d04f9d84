//! What the regional store does besides rate checks.

use std::time::Duration;

use limiter_core::{Blocks, Capabilities, Penalties};

use super::store::RegionalStore;

/// Across a network. Blocks and penalties are kept in every region (see
/// `control.rs`).
impl Capabilities for RegionalStore {
    /// A check's bound: one call to this region's Redis, within
    /// [`RegionalConfig::local_deadline`](crate::RegionalConfig::local_deadline).
    /// A call that also reaches other regions (an operator's block) keeps
    /// their [`peer_deadline`](crate::RegionalConfig::peer_deadline) per
    /// call besides: a guard does not cut it short.
    fn deadline(&self) -> Option<Duration> {
        Some(self.config().local_deadline)
    }

    fn as_blocks(&self) -> Option<&dyn Blocks> {
        Some(self)
    }

    fn as_penalties(&self) -> Option<&dyn Penalties> {
        Some(self)
    }
}
