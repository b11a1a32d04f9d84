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
use super::link::ADJUST;
use super::store::{RegionalStore, regional_rule};
use limiter_core::{BackendError, Decision, Error, Peek, Policy, Receipt, Refunds, Reset, Rule};

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

/// The regions a change did not reach.
#[derive(Debug, thiserror::Error)]
#[error("not confirmed by region(s) {}: the others hold it", regions.join(", "))]
pub struct RegionsNotReached {
    /// The regions that did not confirm, by name.
    pub regions: Vec<String>,
}

/// An error saying which regions did not confirm a change the others hold:
/// [`Error::Unconfirmed`], whose cause is a backend error of kind
/// `regions` holding a [`RegionsNotReached`]. The change is idempotent:
/// repeating it completes it.
pub(crate) fn not_reached(regions: Vec<String>) -> Error {
    Error::Unconfirmed(Box::new(Error::Backend(BackendError::new(
        "regions",
        RegionsNotReached { regions },
    ))))
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
/// check finds the whole quota, in any region. Answers once every region
/// confirmed; a region that did not (down, cut off, past the peer
/// deadline) is named in an [`Error::Unconfirmed`] while the others hold
/// the reset: repeat the call to complete it.
#[limiter_core::async_trait]
impl Reset for RegionalStore {
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        let (rule, sliding) = regional_rule(policy, 1)?;
        let inner = &self.inner;
        let call = adjust_call(key, rule, sliding, "reset", &[]);
        let here = inner.local.link.eval(&ADJUST, &call);
        let there = join_all(
            inner
                .peers
                .iter()
                .map(|peer| call_peer(inner, peer, peer.link.eval(&ADJUST, &call))),
        );
        let (here, there) = tokio::join!(here, there);
        let mut missed: Vec<String> = Vec::new();
        if let Err(error) = here {
            tracing::debug!(%error, "a regional reset could not reach this region's Redis");
            missed.push(inner.local.name.to_string());
        }
        for (peer, answer) in inner.peers.iter().zip(there) {
            if answer.is_none() {
                missed.push(peer.name.to_string());
            }
        }
        if missed.is_empty() {
            Ok(())
        } else {
            Err(not_reached(missed))
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
