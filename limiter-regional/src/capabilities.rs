//! What the regional store does besides rate checks.

use std::time::Duration;

use limiter_core::{AnnouncesResets, Blocks, Capabilities, Peek, Penalties, Refunds, Reset};

use super::store::RegionalStore;

/// Across a network. Peeks, resets (in every region) and refunds (where
/// counted) are in `counts.rs`; blocks and penalties, kept in every region,
/// in `control.rs`.
impl Capabilities for RegionalStore {
    /// A check's bound: one call to this region's Redis, within
    /// [`RegionalConfig::local_deadline`](crate::RegionalConfig::local_deadline).
    /// A call that also reaches other regions (an operator's block, a
    /// reset) keeps their [`peer_deadline`](crate::RegionalConfig::peer_deadline)
    /// per call besides: a guard does not cut it short.
    fn deadline(&self) -> Option<Duration> {
        Some(self.config().local_deadline)
    }

    fn as_peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn as_reset(&self) -> Option<&dyn Reset> {
        Some(self)
    }

    fn as_refunds(&self) -> Option<&dyn Refunds> {
        Some(self)
    }

    fn as_blocks(&self) -> Option<&dyn Blocks> {
        Some(self)
    }

    fn as_penalties(&self) -> Option<&dyn Penalties> {
        Some(self)
    }

    /// This region's Redis tells its instances of every key reset through
    /// any region (see [`Reset`]).
    fn as_reset_announcer(&self) -> Option<&dyn AnnouncesResets> {
        Some(&self.inner.local.store)
    }
}
