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
use super::check::regional_rule;
use super::control::not_confirmed_error;
use super::link::{ADJUST, KNOWN};
use super::shares::share;
use super::store::RegionalStore;
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

/// What a region knows of a key's counts in the current window
/// ([`RegionalStore::known_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KnownCounts {
    /// The window's start (µs since the Unix epoch, this region's clock).
    pub window_start_us: u64,
    /// This region's count in the window.
    pub here: u64,
    /// This region's lease of the window's quota: its share, plus what the
    /// others gave it, minus what it gave them.
    pub lease: u64,
    /// Each other region's count, by name, as that region last told this
    /// one in this window (at an ask or a give between the two: it may lag
    /// by up to the window); `None` when it told none this window.
    pub others: Vec<(String, Option<u64>)>,
}

impl KnownCounts {
    /// The count across regions as this region knows it: its own and what
    /// the others last told it (a lower bound: counts only grow within a
    /// window).
    pub fn total(&self) -> u64 {
        self.here + self.others.iter().filter_map(|(_, c)| *c).sum::<u64>()
    }
}

impl RegionalStore {
    /// What this region knows of `key`'s counts under `policy` in the
    /// current window, from its own Redis, without a call to another
    /// region: its count and lease, and each other region's count as that
    /// region last told it this window (asks carry the asker's count, gives
    /// the giver's). A peek ([`Peek`]) answers what a check here would; this
    /// answers the count across regions, as far as this region knows it.
    pub async fn known_counts(&self, key: &str, policy: &Policy) -> Result<KnownCounts, Error> {
        self.known_counts_when(key, policy, None).await
    }

    /// [`known_counts`](Self::known_counts) at `now` (µs since the Unix
    /// epoch) given by the caller. For tests that drive windows by hand only.
    #[cfg(feature = "test-util")]
    pub async fn known_counts_at(
        &self,
        key: &str,
        policy: &Policy,
        now: u64,
    ) -> Result<KnownCounts, Error> {
        self.known_counts_when(key, policy, Some(now)).await
    }

    async fn known_counts_when(
        &self,
        key: &str,
        policy: &Policy,
        now: Option<u64>,
    ) -> Result<KnownCounts, Error> {
        let (rule, sliding) = regional_rule(policy, 1)?;
        let inner = &self.inner;
        let mut call = KNOWN.call(key);
        match now {
            Some(now) => call.arg(now),
            None => call.arg(""),
        };
        call.arg("")
            .arg(rule.window_us())
            .arg(u8::from(sliding))
            .arg(share(rule.limit(), inner.regions(), inner.local.rank));
        for peer in &inner.peers {
            call.arg(&*peer.name);
        }
        let reply = inner.local.link.eval(&KNOWN, &call).await?;
        let malformed = || Error::Protocol(format!("regional counts reply {reply:?}"));
        let [start, here, lease, rest @ ..] = &reply[..] else {
            return Err(malformed());
        };
        if rest.len() != inner.peers.len() {
            return Err(malformed());
        }
        let number = |n: &i64| u64::try_from(*n).map_err(|_| malformed());
        let others = inner
            .peers
            .iter()
            .zip(rest)
            .map(|(peer, &count)| (peer.name.to_string(), u64::try_from(count).ok()))
            .collect();
        Ok(KnownCounts {
            window_start_us: number(start)?,
            here: number(here)?,
            lease: number(lease)?,
            others,
        })
    }

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
/// check finds the whole quota, in any region, on every instance (each
/// region's instances are told, as instances sharing one Redis are, and
/// forget what they remember of the key: a denial in a deny cache). Made
/// here first (a failure
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
        inner.local.store.announce_reset(key).await?;
        let call = &call;
        let there = join_all(inner.peers.iter().map(|peer| async move {
            let reset = async {
                peer.link.eval(&ADJUST, call).await?;
                peer.store.announce_reset(key).await
            };
            (peer, call_peer(inner, peer, reset).await)
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
