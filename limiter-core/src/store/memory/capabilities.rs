//! What the memory store does besides rate checks: read a key ahead
//! (peek), forget it (reset), block keys, count penalties, keep plan
//! assignments and concurrency permits, all in this process: at the
//! clock's time through the capability traits, at a given time (the
//! conformance suite's) through the `*_at` methods.

use async_trait::async_trait;

use super::*;
use crate::store::Capabilities;
use crate::{
    ActiveOverride, Blocks, Override, OverrideTable, Overrides, Peek, Penalties, PlanAssignments,
    Refunds, Reset, validate_override_duration,
};

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

    fn as_overrides(&self) -> Option<&dyn Overrides> {
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

impl<C: Clock> MemoryStore<C> {
    /// What a check of `cost` at `now` would answer, recording nothing
    /// (see [`Peek`](crate::Peek)).
    pub fn peek_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.decide_at(key, policy, cost, now, Record::No)
    }

    /// Checks a request of `cost` at `now` like [`check_at`](Self::check_at),
    /// and answers what it recorded when allowed (see [`Refunds`](crate::Refunds)).
    pub fn check_refundable_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        policy.counts_by_outcome()?;
        let decision = self.check_at(key, policy, cost, now)?;
        let receipt = decision.allowed().then(|| Receipt::new(now, cost));
        Ok((decision, receipt))
    }

    /// Gives back what `receipt` recorded on `key` (see [`Refunds`](crate::Refunds)).
    pub fn refund_now(&self, key: &str, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        policy.counts_by_outcome()?;
        let (at_us, cost) = (receipt.at_us(), receipt.cost());
        let hash = self.inner.hasher.hash_one(key);
        let at = Lookup {
            key,
            hash,
            now: at_us,
            hasher: &self.inner.hasher,
        };
        let rule = policy.rules()[0];
        let mut shard = self.shard(hash);
        match policy.kind() {
            Kind::SlidingLog => shard.change(
                |t: &mut Tables| &mut t.logs,
                at,
                |log: &mut Option<Log>| {
                    if let Some(log) = log {
                        sliding_log::refund(log, at_us, cost);
                    }
                },
            ),
            Kind::FixedWindow => shard.change(
                |t: &mut Tables| &mut t.windows,
                at,
                |w| fixed_window::refund(w, &rule, at_us, cost),
            ),
            Kind::SlidingWindow => shard.change(
                |t: &mut Tables| &mut t.counters,
                at,
                |c| sliding_window::refund(c, &rule, at_us, cost),
            ),
            Kind::TokenBucket(_) | Kind::LeakyBucket(_) | Kind::Gcra(_) => {
                unreachable!("refused by counts_by_outcome")
            }
        }
        Ok(())
    }

    /// Counts a denial of `key` by `penalty` at `now` (see [`Penalties`](crate::Penalties));
    /// the block it earns.
    pub fn penalize_at(&self, key: &str, penalty: &Penalty, now: u64) -> Option<Duration> {
        self.inner.penalties.record(key, penalty, now)
    }

    /// Forgets `key`'s state at `now` (see [`Reset`](crate::Reset)).
    pub fn reset_at(&self, key: &str, policy: &Policy, now: u64) {
        self.inner.penalties.forget(key);
        let hash = self.inner.hasher.hash_one(key);
        let at = Lookup {
            key,
            hash,
            now,
            hasher: &self.inner.hasher,
        };
        let mut shard = self.shard(hash);
        match policy.kind() {
            Kind::SlidingLog => shard.reset(|t: &mut Tables| &mut t.logs, at),
            Kind::FixedWindow => shard.reset(|t: &mut Tables| &mut t.windows, at),
            Kind::SlidingWindow => shard.reset(|t: &mut Tables| &mut t.counters, at),
            Kind::TokenBucket(_) | Kind::LeakyBucket(_) => {
                shard.reset(|t: &mut Tables| &mut t.buckets, at)
            }
            Kind::Gcra(_) => shard.reset(|t: &mut Tables| &mut t.gcra, at),
        }
    }
}

/// This instance's overrides, by the store's clock.
#[async_trait]
impl<C: Clock> Overrides for MemoryStore<C> {
    async fn set_override(
        &self,
        limit: &str,
        value: &Override,
        duration: Duration,
    ) -> Result<(), Error> {
        validate_override_duration(duration)?;
        let now = self.inner.clock.now_micros();
        Ok(self
            .inner
            .overrides
            .set(limit, value.clone(), duration, now)?)
    }

    async fn clear_override(&self, limit: &str) -> Result<(), Error> {
        self.inner.overrides.clear(limit);
        Ok(())
    }

    fn override_of(&self, limit: &str) -> Option<(Arc<Override>, Duration)> {
        (self.inner.overrides).get(limit, self.inner.clock.now_micros())
    }

    fn overrides(&self) -> Vec<ActiveOverride> {
        self.inner.overrides.list(self.inner.clock.now_micros())
    }

    fn override_table(&self) -> Option<Arc<OverrideTable>> {
        Some(Arc::clone(&self.inner.overrides))
    }
}
