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
use super::store::{self, RegionalStore};
use limiter_core::{Decision, Error, Policy, Receipt, Rule};

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

/// Runs `adjust.lua` (`what`, then `args`) on `key` in this region.
pub(crate) async fn adjust_here(
    store: &RegionalStore,
    key: &str,
    rule: Rule,
    sliding: bool,
    what: &str,
    args: &[u64],
) -> Result<(), Error> {
    let call = adjust_call(key, rule, sliding, what, args);
    store.inner.local.link.eval(&ADJUST, &call).await.map(drop)
}

pub(crate) async fn known_counts_when(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
    now: Option<u64>,
) -> Result<KnownCounts, Error> {
    let (rule, sliding) = regional_rule(policy, 1)?;
    let inner = &store.inner;
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

pub(crate) async fn peek_when(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<Decision, Error> {
    let (rule, sliding) = regional_rule(policy, cost)?;
    let inner = &store.inner;
    let reply = store::check_script(inner, key, rule, sliding, cost, now, true).await?;
    reply.decide(rule, sliding, cost, inner.ask_wait())
}

pub(crate) async fn check_refundable_when(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<(Decision, Option<Receipt>), Error> {
    policy.counts_by_outcome()?;
    let (decision, at) = store::run_recorded(store, key, policy, cost, now).await?;
    let receipt = decision.allowed().then(|| Receipt::new(at, cost));
    Ok((decision, receipt))
}

/// Resets `key` in this region, then in every other region at once (see
/// [`KeyState::reset`](limiter_core::KeyState::reset) on the store).
pub(crate) async fn reset_everywhere(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
) -> Result<(), Error> {
    let (rule, sliding) = regional_rule(policy, 1)?;
    let inner = &store.inner;
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

/// Gives back in this region what a check here counted (see
/// [`KeyState::check_refundable`](limiter_core::KeyState::check_refundable) on the store).
pub(crate) async fn refund_here(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
    receipt: &Receipt,
) -> Result<(), Error> {
    policy.counts_by_outcome()?;
    let (rule, sliding) = regional_rule(policy, receipt.cost())?;
    adjust_here(
        store,
        key,
        rule,
        sliding,
        "refund",
        &[receipt.at_us(), receipt.cost()],
    )
    .await
}
