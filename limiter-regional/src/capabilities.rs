//! What the regional store does besides rate checks.

use super::store::RegionalStore;
use limiter_core::{Capabilities, Peek, Refunds, Reset};

/// Across a network. Peeks, resets (in every region) and refunds (where
/// counted) are in `counts.rs`.
impl Capabilities for RegionalStore {
    fn as_peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn as_reset(&self) -> Option<&dyn Reset> {
        Some(self)
    }

    fn as_refunds(&self) -> Option<&dyn Refunds> {
        Some(self)
    }
}
