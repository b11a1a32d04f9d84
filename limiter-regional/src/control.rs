//! Blocks and penalties across regions, each region's kept by a Redis
//! store of its own on that region's Redis (its blocks reach its instances
//! through that store's notices).
//!
//! An operator's block or unblock goes into this region's Redis, then into
//! every other region's at once, and is answered once each has confirmed;
//! a region that did not gets it again from its outbox (`outbox.rs`).
//! A denial is counted here, answered, then counted in every other region
//! in the background (a relay), so that denials add up across regions
//! without a 429 waiting on another region; a block a penalty earns is
//! relayed likewise (`relay.rs`: at most
//! [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT) under way).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use limiter_core::{BackendError, BlockOrigin, Change, Error, Penalty, SharedControl};
use limiter_redis::RedisStore;

use super::inner::{Inner, Peer};
use super::outbox::{self, REDELIVER_EVERY, Waiting};
use super::relay;
use super::stats::bump;
use super::store::RegionalStore;

/// A block or an unblock that some regions did not confirm: the regions
/// that did keep it, the others do not have it yet (or may: a call that
/// timed out may have run) and get it again in the background until they
/// confirm it (see `RegionalStore`'s `SharedControl`). A reset is not sent
/// again. Repeating the call completes it at once: blocks, unblocks and
/// resets are idempotent.
///
/// Answered inside [`Error::Backend`] of kind `region`; reached with
/// [`BackendError::downcast_ref`].
#[derive(Debug)]
pub struct RegionsNotConfirmed {
    change: &'static str,
    confirmed: Vec<Box<str>>,
    not_confirmed: Vec<(Box<str>, Error)>,
}

impl RegionsNotConfirmed {
    /// The regions that confirmed the change (this region first).
    pub fn confirmed(&self) -> impl Iterator<Item = &str> {
        self.confirmed.iter().map(|name| &**name)
    }

    /// The regions that did not, each with its error.
    pub fn not_confirmed(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.not_confirmed
            .iter()
            .map(|(name, error)| (&**name, error))
    }
}

impl fmt::Display for RegionsNotConfirmed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} was not confirmed by ", self.change)?;
        for (i, (name, error)) in self.not_confirmed.iter().enumerate() {
            let separator = if i == 0 { "" } else { ", " };
            write!(f, "{separator}region {name} ({error})")?;
        }
        write!(f, "; made in {}", self.confirmed.join(", "))?;
        f.write_str(": repeat the call to complete it (it is idempotent)")
    }
}

impl std::error::Error for RegionsNotConfirmed {}

/// `change`, confirmed by some regions only: [`Error::Backend`] of kind
/// `region` holding the [`RegionsNotConfirmed`].
pub(crate) fn not_confirmed_error(
    change: &'static str,
    confirmed: Vec<Box<str>>,
    not_confirmed: Vec<(Box<str>, Error)>,
) -> Error {
    let missed = RegionsNotConfirmed {
        change,
        confirmed,
        not_confirmed,
    };
    Error::Backend(BackendError::new("region", missed))
}

/// A denial of `key` counted by `store` (a region's).
async fn denial(
    store: &RedisStore,
    key: &str,
    penalty: &Penalty,
) -> Result<Option<Duration>, Error> {
    store.penalize(key, penalty, key).await
}

impl Inner {
    /// Makes this region's Redis store follow its blocks' notices (it
    /// does so from its first block otherwise), so that this instance
    /// learns every block made in this region, once there is a runtime.
    pub(crate) fn follow_blocks(&self) {
        let relays = &self.relays;
        if relays.following.load(Ordering::Acquire)
            || tokio::runtime::Handle::try_current().is_err()
        {
            return;
        }
        if !relays.following.swap(true, Ordering::AcqRel) {
            // Registering for resets subscribes the store; nothing is
            // forgotten here, so the registration drops itself at once.
            self.local.store.on_reset(Box::new(|_| false));
        }
    }

    /// `key` blocked here, then in every other region.
    pub(crate) async fn block_everywhere(
        self: &Arc<Self>,
        key: &str,
        duration: Duration,
        origin: BlockOrigin,
    ) -> Result<(), Error> {
        let block = Change::Block {
            key,
            duration,
            origin,
        };
        self.local.store.change(block).await?;
        self.to_peers("block", block).await
    }

    /// `change` (a block or an unblock) made in every other region at
    /// once: `Ok` once each has confirmed, else the regions that did not.
    /// A region that did not waits for it in its outbox, which sends it
    /// again until it confirms (`outbox.rs`), unless a later change of the
    /// key supersedes it.
    pub(crate) async fn to_peers(
        self: &Arc<Self>,
        name: &'static str,
        change: Change<'_>,
    ) -> Result<(), Error> {
        let key = change.key();
        let number = self.relays.changes.fetch_add(1, Ordering::Relaxed);
        // A block's end as of now, not after the calls that may fail.
        let waiting = Waiting::of(&change);
        let sent = join_all(self.peers.iter().map(|peer| async move {
            // While changes wait for the region, one at a time: a
            // redelivered one never lands after this one. Otherwise (the
            // usual case) changes go at once, a flood's relays included.
            let turn = match peer.outbox.len() {
                0 => None,
                _ => Some(peer.outbox.turn.lock().await),
            };
            let answer = self.on_peer(peer, || peer.store.change(change)).await;
            drop(turn);
            (peer, answer)
        }))
        .await;
        let mut confirmed = vec![self.local.name.clone()];
        let mut not_confirmed = Vec::new();
        for (peer, answer) in sent {
            match answer {
                Ok(()) => {
                    peer.outbox.settled(key, number);
                    confirmed.push(peer.name.clone());
                }
                // Refused there (a bound): an answer, not sent again.
                Err(error @ (Error::Full(_) | Error::Config(_))) => {
                    peer.outbox.settled(key, number);
                    not_confirmed.push((peer.name.clone(), error));
                }
                Err(error) => {
                    if let Some(waiting) = waiting {
                        self.wait_for(peer, key, number, waiting);
                    }
                    not_confirmed.push((peer.name.clone(), error));
                }
            }
        }
        if not_confirmed.is_empty() {
            return Ok(());
        }
        Err(not_confirmed_error(name, confirmed, not_confirmed))
    }

    /// `change` of `key`, numbered `number`, waits for `peer` to be sent
    /// again.
    fn wait_for(self: &Arc<Self>, peer: &Peer, key: &str, number: u64, waiting: Waiting) {
        if peer.outbox.wait(key, number, waiting) {
            redeliver(self, &self.relays.redelivering);
        } else {
            metrics::counter!("limiter_region_outbox_dropped_total", "region" => peer.name.to_string())
                .increment(1);
            tracing::warn!(
                region = &*peer.name,
                key,
                "a change this region missed is not kept to be sent again: {} keys wait already",
                outbox::MAX_WAITING
            );
        }
    }

    /// `call` on every other region's store at once, each through its
    /// breaker, counted as a write.
    async fn on_every_peer<'a, T, F>(
        &'a self,
        call: impl Fn(&'a RedisStore) -> F,
    ) -> Vec<(&'a Peer, Result<T, Error>)>
    where
        F: Future<Output = Result<T, Error>> + 'a,
    {
        let call = &call;
        let calls = self.peers.iter().map(|peer| async move {
            let answer = self.on_peer(peer, || call(&peer.store)).await;
            (peer, answer)
        });
        join_all(calls).await
    }

    /// One call to `peer` (its store bounds it by the peer deadline):
    /// skipped while its breaker is open; a refusal (a bound reached
    /// there) is an answer, not a failure of the region.
    pub(crate) async fn on_peer<T, F>(
        &self,
        peer: &Peer,
        call: impl FnOnce() -> F,
    ) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>>,
    {
        let failed = |kind: &'static str| {
            bump(&self.stats.remote_errors);
            metrics::counter!("limiter_region_errors_total", "region" => peer.name.to_string(), "kind" => kind)
                .increment(1);
        };
        if !peer.breaker.allow() {
            failed("breaker_open");
            return Err(Error::Unavailable(self.config.peer_breaker.probe_interval));
        }
        bump(&self.stats.cross_region_calls);
        metrics::counter!("limiter_region_calls_total", "region" => peer.name.to_string(), "call" => "write")
            .increment(1);
        let answer = call().await;
        match &answer {
            Ok(_) | Err(Error::Full(_) | Error::Config(_)) => peer.breaker.succeeded(),
            Err(error) => {
                peer.breaker.failed();
                tracing::debug!(region = &*peer.name, %error, "call to another region failed");
                failed(error.kind());
            }
        }
        answer
    }

    /// Logs a relayed block that some region missed: nobody waits for it.
    pub(crate) fn log_missed(&self, blocked: Result<(), Error>) {
        if let Err(error) = blocked {
            let region = &*self.local.name;
            tracing::warn!(region, %error, "a penalty's block is not in every region");
        }
    }
}

/// Starts the task that sends again what waits, once per store.
fn redeliver(inner: &Arc<Inner>, started: &AtomicBool) {
    if started.load(Ordering::Acquire) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if !started.swap(true, Ordering::AcqRel) {
        runtime.spawn(redelivering(Arc::downgrade(inner)));
    }
}

/// Every [`REDELIVER_EVERY`], each region's waiting changes sent again,
/// until the store is dropped.
async fn redelivering(inner: Weak<Inner>) {
    let mut rounds = tokio::time::interval(REDELIVER_EVERY);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        rounds.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let peers = inner.peers.iter().filter(|peer| peer.outbox.len() > 0);
        futures_util::future::join_all(peers.map(|peer| send_again(&inner, peer))).await;
    }
}

/// `peer`'s waiting changes, sent one at a time until one fails.
async fn send_again(inner: &Inner, peer: &Peer) {
    for (key, number, waiting) in peer.outbox.snapshot() {
        let Some(change) = waiting.change(&key) else {
            peer.outbox.settled(&key, number);
            continue;
        };
        let turn = peer.outbox.turn.lock().await;
        // Superseded while this one waited for its turn: the later change
        // is (or was) sent instead.
        if !peer.outbox.is_waiting(&key, number) {
            continue;
        }
        let sent = inner.on_peer(peer, || peer.store.change(change)).await;
        drop(turn);
        match sent {
            Ok(()) | Err(Error::Full(_) | Error::Config(_)) => {
                peer.outbox.settled(&key, number);
                tracing::info!(
                    region = &*peer.name,
                    key = &*key,
                    "a change it missed was delivered"
                );
            }
            Err(_) => return,
        }
    }
}

/// A denial counted here, answered, and relayed to the other regions.
pub(crate) async fn count_denial(
    store: &RegionalStore,
    key: &str,
    penalty: &Penalty,
    block_key: &str,
) -> Result<Option<Duration>, Error> {
    store.inner.follow_blocks();
    let here = denial(&store.inner.local.store, key, penalty).await;
    if !store.inner.peers.is_empty() {
        let earned_here = matches!(here, Ok(Some(_)));
        let (key, penalty, block_key) = (key.to_owned(), penalty.clone(), block_key.to_owned());
        relay::relay(store, move |inner| async move {
            let counted = inner.on_every_peer(|store| denial(store, &key, &penalty));
            let earned = counted.await;
            let earned = earned.into_iter().filter_map(|(_, a)| a.ok().flatten());
            // This region's answer made its caller block already.
            if let (false, Some(block)) = (earned_here, earned.max()) {
                let blocked = inner.block_everywhere(&block_key, block, BlockOrigin::Penalty);
                inner.log_missed(blocked.await);
            }
        });
    }
    here
}
