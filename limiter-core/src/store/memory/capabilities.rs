//! What the memory store does besides rate checks: read a key ahead
//! (peek), forget it (reset), block keys, count penalties, keep plan
//! assignments and concurrency permits, all in this process, at the
//! clock's time.

use async_trait::async_trait;

use super::*;
use crate::store::{Capabilities, Change, KeyState, SharedControl};
use crate::validate_override_duration;

/// In process: never slow, never failing, so nothing guards it.
impl<C: Clock> Capabilities for MemoryStore<C> {
    fn is_remote(&self) -> bool {
        false
    }

    fn as_key_state(&self) -> Option<&dyn KeyState> {
        Some(self)
    }

    fn as_permits(&self) -> Option<&dyn crate::Permits> {
        Some(self)
    }

    fn as_shared_control(&self) -> Option<&dyn SharedControl> {
        Some(self)
    }
}

#[async_trait]
impl<C: Clock> KeyState for MemoryStore<C> {
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.peek_at(key, policy, cost, self.inner.clock.now_micros())
    }

    async fn reset(&self, key: &Key, policy: &Policy) -> Result<(), Error> {
        self.reset_at(key, policy, self.inner.clock.now_micros());
        Ok(())
    }

    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        self.check_refundable_at(key, policy, cost, self.inner.clock.now_micros())
    }

    async fn refund(&self, key: &Key, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        self.refund_now(key, policy, receipt)
    }
}

/// This instance's blocks, plans and overrides, by the store's clock.
#[async_trait]
impl<C: Clock> SharedControl for MemoryStore<C> {
    async fn change(&self, change: Change<'_>) -> Result<(), Error> {
        let tables = &self.inner.tables;
        match change {
            Change::Block {
                key,
                duration,
                origin,
            } => tables.blocks().block(key, duration, origin, tables.now()),
            Change::Unblock { key } => {
                tables.blocks().unblock(key);
                Ok(())
            }
            Change::AssignPlan { key, plan } => tables.plans().assign(key, plan),
            Change::SetOverride {
                limit,
                value,
                duration,
            } => {
                validate_override_duration(duration)?;
                let now = tables.now();
                Ok((tables.overrides()).set(limit, value.clone(), duration, now)?)
            }
            Change::ClearOverride { limit } => {
                tables.overrides().clear(limit);
                Ok(())
            }
        }
    }

    fn tables(&self) -> &ControlTables {
        &self.inner.tables
    }

    async fn penalize(
        &self,
        key: &str,
        penalty: &Penalty,
        _block_key: &str,
    ) -> Result<Option<Duration>, Error> {
        Ok(self.penalize_at(key, penalty, self.inner.clock.now_micros()))
    }

    async fn publish_report(
        &self,
        board: &str,
        instance: &str,
        body: &str,
        ttl: Duration,
    ) -> Result<(), Error> {
        let now = self.inner.clock.now_micros();
        self.inner.reports.publish(board, instance, body, ttl, now)
    }

    async fn reports(&self, board: &str) -> Result<Vec<crate::Report>, Error> {
        Ok(self
            .inner
            .reports
            .read(board, self.inner.clock.now_micros()))
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
    /// (see [`KeyState::peek`](crate::KeyState::peek)).
    pub(crate) fn peek_at(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.decide_at(key, policy, cost, now, Record::No)
    }

    /// Checks a request of `cost` at `now` like [`check_at`](Self::check_at),
    /// and answers what it recorded when allowed (see [`KeyState::check_refundable`](crate::KeyState::check_refundable)).
    pub(crate) fn check_refundable_at(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        policy.counts_by_outcome()?;
        let decision = self.check_at(key, policy, cost, now)?;
        let receipt = decision.allowed().then(|| Receipt::new(now, cost));
        Ok((decision, receipt))
    }

    /// Gives back what `receipt` recorded on `key` (see [`KeyState::check_refundable`](crate::KeyState::check_refundable)).
    pub fn refund_now(&self, key: &Key, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        policy.counts_by_outcome()?;
        let (at_us, cost) = (receipt.at_us(), receipt.cost());
        let key = key.as_str();
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

    /// Counts a denial of `key` by `penalty` at `now` (see [`SharedControl::penalize`](crate::SharedControl::penalize));
    /// the block it earns.
    pub(crate) fn penalize_at(&self, key: &str, penalty: &Penalty, now: u64) -> Option<Duration> {
        self.inner.penalties.record(key, penalty, now)
    }

    /// Forgets `key`'s state at `now` (see [`KeyState::reset`](crate::KeyState::reset)).
    pub(crate) fn reset_at(&self, key: &Key, policy: &Policy, now: u64) {
        let key = key.as_str();
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
