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
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::future::join_all;
use limiter_core::{
    AnnouncesResets, BackendError, BlockList, BlockOrigin, Blocks, Error, Penalties, Penalty,
    async_trait,
};
use limiter_redis::RedisStore;

use super::inner::{Inner, Peer};
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

/// Kept in each region's Redis by the Redis store, as one region's blocks
/// are: this region's list is the one read, without a call, by every
/// request.
///
/// An operator's block or unblock is made here first (a failure here is
/// answered as is, and no other region is called), then in every other
/// region at once, each through that region's breaker, each call within
/// [`RegionalConfig::peer_deadline`](crate::RegionalConfig::peer_deadline)
/// (the Redis store's: the write, then the notice to that region's
/// instances and their acknowledgements). It is answered `Ok` once every
/// region has confirmed it, so every instance of every region answers it
/// then. When some region did not, the call answers [`Error::Backend`] of
/// kind `region` holding [`RegionsNotConfirmed`], which names them: the
/// regions that confirmed keep the change, and repeating the call
/// completes it.
///
/// A block a penalty earned ([`BlockOrigin::Penalty`]) is answered once
/// this region has it, and relayed to the others in the background (see
/// [`Penalties`]): the denial that earned it is not held for a
/// cross-region round trip.
#[async_trait]
impl Blocks for RegionalStore {
    async fn block(&self, key: &str, duration: Duration, origin: BlockOrigin) -> Result<(), Error> {
        self.inner.follow_blocks();
        match origin {
            BlockOrigin::Operator => self.inner.block_everywhere(key, duration, origin).await,
            BlockOrigin::Penalty => {
                self.inner.local.store.block(key, duration, origin).await?;
                let key = key.to_owned();
                self.relay(move |inner| async move {
                    let blocked =
                        inner.to_peers("block", |store| store.block(&key, duration, origin));
                    inner.log_missed(blocked.await);
                });
                Ok(())
            }
        }
    }

    async fn unblock(&self, key: &str) -> Result<(), Error> {
        self.inner.follow_blocks();
        self.inner.local.store.unblock(key).await?;
        self.inner
            .to_peers("unblock", |store| store.unblock(key))
            .await
    }

    fn blocked(&self, key: &str) -> Option<Duration> {
        self.inner.follow_blocks();
        self.inner.local.store.blocked(key)
    }

    fn block_list(&self) -> Option<Arc<BlockList>> {
        self.inner.follow_blocks();
        self.inner.local.store.block_list()
    }
}

/// Denials count in every region: each is counted in this region's Redis
/// (that answer is returned at once) and then relayed to every other
/// region's, in the background. So while the regions are reachable, a
/// denial counts everywhere within a peer round trip (each call within
/// the peer deadline), and a penalty of `n` denials earns its block on
/// the `n`th denial of the identity in all regions together, give or
/// take the denials still on their way. When another region's count earns
/// the block (the `n`th denial reached it as a relay), the relay blocks
/// the identity (the `block_key` of
/// [`penalize_for`](Penalties::penalize_for), `key` itself for
/// [`penalize`](Penalties::penalize)) in every region; when this region's
/// answer earns it, the caller blocks it, as for any store.
///
/// A region unreachable misses the denials relayed meanwhile (nothing is
/// sent again), and at most
/// [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT) relays are under
/// way: past that, a denial counts only here.
#[async_trait]
impl Penalties for RegionalStore {
    async fn penalize(&self, key: &str, penalty: &Penalty) -> Result<Option<Duration>, Error> {
        self.count_denial(key, penalty, key, None).await
    }

    async fn penalize_for(
        &self,
        key: &str,
        penalty: &Penalty,
        block_key: &str,
    ) -> Result<Option<Duration>, Error> {
        self.count_denial(key, penalty, block_key, None).await
    }
}

impl RegionalStore {
    /// Counts a denial of `key` by `penalty` at `now` (µs since the Unix
    /// epoch) given by the caller, here and, relayed, in every other
    /// region. For tests that drive time by hand only.
    #[cfg(feature = "test-util")]
    pub async fn penalize_at(
        &self,
        key: &str,
        penalty: &Penalty,
        now: u64,
    ) -> Result<Option<Duration>, Error> {
        self.count_denial(key, penalty, key, Some(now)).await
    }

    /// A denial counted here, answered, and relayed to the other regions.
    async fn count_denial(
        &self,
        key: &str,
        penalty: &Penalty,
        block_key: &str,
        now: Option<u64>,
    ) -> Result<Option<Duration>, Error> {
        self.inner.follow_blocks();
        let here = denial(&self.inner.local.store, key, penalty, now).await;
        if !self.inner.peers.is_empty() {
            let earned_here = matches!(here, Ok(Some(_)));
            let (key, penalty, block_key) = (key.to_owned(), penalty.clone(), block_key.to_owned());
            self.relay(move |inner| async move {
                let counted = inner.on_every_peer(|store| denial(store, &key, &penalty, now));
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
}

/// A denial of `key` counted by `store`, at `now` when given (tests), else
/// on its server's clock.
async fn denial(
    store: &RedisStore,
    key: &str,
    penalty: &Penalty,
    now: Option<u64>,
) -> Result<Option<Duration>, Error> {
    #[cfg(feature = "test-util")]
    if let Some(now) = now {
        return store.penalize_at(key, penalty, now).await;
    }
    let _ = now;
    store.penalize(key, penalty).await
}

impl Inner {
    /// Makes this region's Redis store follow its blocks' notices (it
    /// does so from its first block otherwise), so that this instance
    /// learns every block made in this region, once there is a runtime.
    fn follow_blocks(&self) {
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
    async fn block_everywhere(
        &self,
        key: &str,
        duration: Duration,
        origin: BlockOrigin,
    ) -> Result<(), Error> {
        self.local.store.block(key, duration, origin).await?;
        self.to_peers("block", |store| store.block(key, duration, origin))
            .await
    }

    /// `change` made by `call` in every other region at once: `Ok` once
    /// each has confirmed, else the regions that did not.
    async fn to_peers<'a, F>(
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
    fn log_missed(&self, blocked: Result<(), Error>) {
        if let Err(error) = blocked {
            let region = &*self.local.name;
            tracing::warn!(region, %error, "a penalty's block is not in every region");
        }
    }
}
