//! The memory store's reads ahead, refunds, penalties and resets at a
//! given time: what its capability traits do at the clock's time, and what
//! the conformance suite calls at the times it gives.

use super::*;

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
