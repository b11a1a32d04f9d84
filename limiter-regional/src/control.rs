//! Blocks and penalties across regions, each region's kept by a Redis
//! store of its own on that region's Redis (its blocks reach its instances
//! through that store's notices).
//!
//! An operator's block or unblock goes into this region's Redis, then into
//! every other region's at once, and is answered once each has confirmed.
//! A denial is counted here, answered, then counted in every other region
//! in the background (a relay), so that denials add up across regions
//! without a 429 waiting on another region; a block a penalty earns is
//! relayed likewise (`relay.rs`: at most
//! [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT) under way).

use std::fmt;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::future::join_all;
use limiter_core::{BackendError, BlockOrigin, Change, Error, Penalty, SharedControl};
use limiter_redis::RedisStore;

use super::inner::{Inner, Peer};
use super::relay;
use super::stats::bump;
use super::store::RegionalStore;

/// A block or an unblock that some regions did not confirm: the regions
/// that did keep it, the others do not have it (or may: a call that timed
/// out may have run). Repeating the call completes it: blocks and unblocks
/// are idempotent.
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
        &self,
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
        self.to_peers("block", |store| store.change(block)).await
    }

    /// `change` made by `call` in every other region at once: `Ok` once
    /// each has confirmed, else the regions that did not.
    pub(crate) async fn to_peers<'a, F>(
        &'a self,
        change: &'static str,
        call: impl Fn(&'a RedisStore) -> F,
    ) -> Result<(), Error>
    where
        F: Future<Output = Result<(), Error>> + 'a,
    {
        let mut confirmed = vec![self.local.name.clone()];
        let mut not_confirmed = Vec::new();
        for (peer, answer) in self.on_every_peer(call).await {
            match answer {
                Ok(()) => confirmed.push(peer.name.clone()),
                Err(error) => not_confirmed.push((peer.name.clone(), error)),
            }
        }
        if not_confirmed.is_empty() {
            return Ok(());
        }
        Err(not_confirmed_error(change, confirmed, not_confirmed))
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
    async fn on_peer<T, F>(&self, peer: &Peer, call: impl FnOnce() -> F) -> Result<T, Error>
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
