//! What the memory store does besides rate checks: read a key ahead
//! (peek), forget it (reset), block keys, count penalties, keep plan
//! assignments and concurrency permits, all in this process, each at the
//! clock's time (see `at_time.rs` for the same at a given time).

use async_trait::async_trait;

use super::*;
use crate::store::Capabilities;
use crate::{Blocks, Peek, Penalties, PlanAssignments, Refunds, Reset};

/// In process: never slow, never failing, so nothing guards it.
impl<C: Clock> Capabilities for MemoryStore<C> {
    fn is_remote(&self) -> bool {
        false
    }

    fn as_permits(&self) -> Option<&dyn crate::Permits> {
        Some(self)
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

    fn as_plan_assignments(&self) -> Option<&dyn PlanAssignments> {
        Some(self)
    }
}

#[async_trait]
impl<C: Clock> Refunds for MemoryStore<C> {
    async fn check_refundable(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        self.check_refundable_at(key, policy, cost, self.inner.clock.now_micros())
    }

    async fn refund(&self, key: &str, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        self.refund_now(key, policy, receipt)
    }
}

#[async_trait]
impl<C: Clock> Peek for MemoryStore<C> {
    async fn peek(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.peek_at(key, policy, cost, self.inner.clock.now_micros())
    }
}

#[async_trait]
impl<C: Clock> Blocks for MemoryStore<C> {
    async fn block(&self, key: &str, duration: Duration, origin: BlockOrigin) -> Result<(), Error> {
        let now = self.inner.clock.now_micros();
        self.inner.blocks.block(key, duration, origin, now)
    }

    async fn unblock(&self, key: &str) -> Result<(), Error> {
        self.inner.blocks.unblock(key);
        Ok(())
    }

    #[inline]
    fn blocked(&self, key: &str) -> Option<Duration> {
        self.inner
            .blocks
            .blocked(key, || self.inner.clock.now_micros())
    }

    fn block_list(&self) -> Option<Arc<BlockList>> {
        Some(Arc::clone(&self.inner.blocks))
    }
}

#[async_trait]
impl<C: Clock> Penalties for MemoryStore<C> {
    async fn penalize(&self, key: &str, penalty: &Penalty) -> Result<Option<Duration>, Error> {
        Ok(self.penalize_at(key, penalty, self.inner.clock.now_micros()))
    }
}

#[async_trait]
impl<C: Clock> PlanAssignments for MemoryStore<C> {
    async fn assign_plan(&self, key: &str, plan: Option<&str>) -> Result<(), Error> {
        self.inner.plans.assign(key, plan)
    }

    fn assigned_plan(&self, key: &str) -> Option<Arc<str>> {
        self.inner.plans.get(key)
    }

    fn assigned_plans(&self) -> usize {
        self.inner.plans.len()
    }
}

#[async_trait]
impl<C: Clock> Reset for MemoryStore<C> {
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        self.reset_at(key, policy, self.inner.clock.now_micros());
        Ok(())
    }
}

#[async_trait]
impl<C: Clock> crate::Permits for MemoryStore<C> {
    async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        Ok(self.acquire_permit_now(key, limit))
    }
}
