//! Peeks, resets and refunds of a key's counts.
//!
//! A peek reads this region's Redis only: it answers what a check here
//! would answer now. A reset runs in every region at once (each bounded by
//! its deadline), so the key finds its whole quota everywhere; leases are
//! kept, so the shares still add up to the quota. A refund gives back, in
//! this region, what a check here counted: the count it was counted in, in
//! the window it was counted in.

use futures_util::future::join_all;

use super::ask::call_peer;
use super::control::not_confirmed_error;
use super::link::ADJUST;
use super::store::{RegionalStore, regional_rule};
use limiter_core::{Decision, Error, Peek, Policy, Receipt, Refunds, Reset, Rule};

impl RegionalStore {
    /// Runs `adjust.lua` (`what`, then `args`) on `key` in this region.
    async fn adjust_here(
        &self,
        key: &str,
        rule: Rule,
        sliding: bool,
        what: &str,
        args: &[u64],
    ) -> Result<(), Error> {
        let call = adjust_call(key, rule, sliding, what, args);
        self.inner.local.link.eval(&ADJUST, &call).await.map(drop)
    }
}

fn adjust_call(key: &str, rule: Rule, sliding: bool, what: &str, args: &[u64]) -> redis::Cmd {
    let mut call = ADJUST.call(key);
    call.arg("")
        .arg("")
        .arg(rule.window_us())
        .arg(u8::from(sliding))
        .arg(what);
    for arg in args {
        call.arg(*arg);
    }
    call
}

/// What a check here would answer now, recording nothing: this region's
/// count against its lease. Other regions' counts do not enter it: they
/// hold their own leases.
#[limiter_core::async_trait]
impl Peek for RegionalStore {
    async fn peek(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.peek_when(key, policy, cost, None).await
    }
}

impl RegionalStore {
    async fn peek_when(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        let (rule, sliding) = regional_rule(policy, cost)?;
        let inner = &self.inner;
        let reply = inner.check(key, rule, sliding, cost, now, true).await?;
        reply.decide(rule, sliding, cost, inner.ask_wait())
    }

    async fn check_refundable_when(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        policy.counts_by_outcome()?;
        let (decision, at) = self.run_recorded(key, policy, cost, now).await?;
        let receipt = decision.allowed().then(|| Receipt::new(at, cost));
        Ok((decision, receipt))
    }

    /// Peeks at `now` (µs since the Unix epoch) given by the caller. For
    /// tests that drive windows by hand only.
    #[cfg(feature = "test-util")]
    pub async fn peek_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.peek_when(key, policy, cost, Some(now)).await
    }

    /// Checks counted by outcome at `now` (µs since the Unix epoch) given
    /// by the caller. For tests that drive windows by hand only.
    #[cfg(feature = "test-util")]
    pub async fn check_refundable_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        self.check_refundable_when(key, policy, cost, Some(now))
            .await
    }
}

/// Forgets the key's counts in every region (its leases stay): its next
/// check finds the whole quota, in any region. Made here first (a failure
/// here is answered as is, and no other region is called), then in every
/// other region at once, each call within the peer deadline and through
/// that region's breaker. Answers `Ok` once every region confirmed; when
/// some region did not, [`Error::Backend`] of kind `region` holding
/// [`RegionsNotConfirmed`](crate::RegionsNotConfirmed), which names it: the
/// others hold the reset, and repeating the call completes it.
#[limiter_core::async_trait]
impl Reset for RegionalStore {
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        let (rule, sliding) = regional_rule(policy, 1)?;
        let inner = &self.inner;
        let call = adjust_call(key, rule, sliding, "reset", &[]);
        inner.local.link.eval(&ADJUST, &call).await?;
        let call = &call;
        let there = join_all(inner.peers.iter().map(|peer| async move {
            let answer = call_peer(inner, peer, peer.link.eval(&ADJUST, call)).await;
            (peer, answer)
        }))
        .await;
        let mut confirmed = vec![inner.local.name.clone()];
        let mut missed = Vec::new();
        for (peer, answer) in there {
            match answer {
                Ok(_) => confirmed.push(peer.name.clone()),
                Err(error) => missed.push((peer.name.clone(), error)),
            }
        }
        if missed.is_empty() {
            Ok(())
        } else {
            Err(not_confirmed_error("reset", confirmed, missed))
        }
    }
}

/// Refunds give back in this region what a check here counted, exactly:
/// the request's cost comes off this region's count in the window it was
/// counted in (the current one, or for the sliding window counter the one
/// before), so this region may admit it again; its lease is unchanged, so
/// the quota still holds across regions.
#[limiter_core::async_trait]
impl Refunds for RegionalStore {
    async fn check_refundable(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        self.check_refundable_when(key, policy, cost, None).await
    }

    async fn refund(&self, key: &str, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        policy.counts_by_outcome()?;
        let (rule, sliding) = regional_rule(policy, receipt.cost())?;
        self.adjust_here(
            key,
            rule,
            sliding,
            "refund",
            &[receipt.at_us(), receipt.cost()],
        )
        .await
    }
}
