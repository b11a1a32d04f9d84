//! Each instance's subscription to the notices (`announce.rs`): made
//! again whenever it breaks, with the blocks, plans and overrides read whole each
//! time, and the version hash polled between notices (`reconcile.rs`).

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use futures_util::StreamExt;
use limiter_core::{Clock, Error, Forget, SystemClock};
use redis::Client;

use super::RedisStore;
use super::announce::{CHANNEL, PLANS, forget, on_message};
use super::reconcile::{self, POLL_INTERVAL, Version};
use super::store::{Backend, Inner};

/// The longest pause between two attempts to subscribe again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The subscription: runs while the store does.
pub(crate) async fn listen(inner: Weak<Inner>) {
    let mut backoff = Duration::from_millis(50);
    let mut first = true;
    loop {
        let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
            return;
        };
        let timeout = store.inner.config.connection_timeout;
        let subscribed = tokio::time::timeout(timeout, subscribe_at(&store))
            .await
            .unwrap_or(Err(Error::Timeout(timeout)));
        match subscribed {
            Ok(Subscribed {
                pubsub,
                connection,
                version,
                state,
            }) => {
                backoff = Duration::from_millis(50);
                state.apply(&store);
                store.inner.announcer.mark_synced();
                if !first {
                    forget(&store, &Forget::Everything);
                }
                first = false;
                drop(store);
                if !follow(&inner, pubsub, connection, version).await {
                    return;
                }
                tracing::warn!("the subscription to resets was lost: subscribing again");
                continue;
            }
            Err(error) => tracing::debug!(%error, "not subscribed to resets yet"),
        }
        drop(store);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Applies the notices of a subscription, and polls the version hash
/// between them (`reconcile.rs`), until the subscription or the poll's
/// connection breaks (`true`: subscribe again) or the store is gone.
async fn follow(
    inner: &Weak<Inner>,
    pubsub: redis::aio::PubSub,
    mut connection: redis::aio::MultiplexedConnection,
    mut version: Version,
) -> bool {
    let mut messages = pubsub.into_on_message();
    let mut polls = tokio::time::interval(POLL_INTERVAL);
    polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    polls.reset();
    loop {
        tokio::select! {
            message = messages.next() => {
                let Some(message) = message else { return true };
                let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
                    return false;
                };
                on_message(&store, &message).await;
            }
            _ = polls.tick() => {
                let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
                    return false;
                };
                match reconcile::poll(&store, &mut connection, &mut version).await {
                    Ok(()) => {}
                    // Redis is slow or hung: the next poll tries again.
                    Err(error @ Error::Timeout(_)) => {
                        tracing::debug!(%error, "the version of blocks and plans was not read");
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the version of blocks and plans cannot be read");
                        return true;
                    }
                }
            }
        }
    }
}

/// A subscription to [`CHANNEL`] on the node the notices go through, a
/// connection to that node (for the polls), the version hash as read
/// before the state, and the state that node holds once subscribed: a
/// notice published after the reading is received, one before is in it.
pub(crate) struct Subscribed {
    pubsub: redis::aio::PubSub,
    connection: redis::aio::MultiplexedConnection,
    version: Version,
    state: BlocksAndPlans,
}

/// The blocks (key, time left, origin), plans (key, plan) and overrides
/// (limit, override, time left) that Redis holds.
pub(crate) struct BlocksAndPlans {
    blocks: Vec<(String, Duration, limiter_core::BlockOrigin)>,
    plans: Vec<(String, String)>,
    overrides: Vec<(String, limiter_core::Override, Duration)>,
}

impl BlocksAndPlans {
    /// Makes them this instance's blocks and plans, replacing what it had.
    pub(crate) fn apply(self, store: &RedisStore) {
        let inner = &store.inner;
        let now = SystemClock.now_micros();
        inner.blocks.replace(self.blocks, now);
        inner.plans.replace(self.plans);
        inner.overrides.replace(self.overrides, now);
    }
}

/// Reads the blocks and plans from `connection`: at each subscription, and
/// whenever the version hash says they changed unannounced.
pub(crate) async fn read_blocks_and_plans(
    store: &RedisStore,
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<BlocksAndPlans, Error> {
    let blocks = crate::blocks::load(store, connection).await?;
    let plans: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(PLANS)
        .query_async(connection)
        .await
        .map_err(crate::redis_error)?;
    let overrides = crate::overrides::load(connection).await?;
    Ok(BlocksAndPlans {
        blocks,
        plans: plans.into_iter().collect(),
        overrides,
    })
}

/// Subscribes to [`CHANNEL`], then reads the version hash, then the
/// blocks and plans (a change between the two readings is read again at
/// the first poll).
async fn subscribe_at(store: &RedisStore) -> Result<Subscribed, Error> {
    let client = subscriber(store).await?;
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .map_err(crate::redis_error)?;
    pubsub
        .subscribe(CHANNEL)
        .await
        .map_err(crate::redis_error)?;
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .map_err(crate::redis_error)?;
    let version = reconcile::read_version(&mut connection).await?;
    let state = read_blocks_and_plans(store, &mut connection).await?;
    Ok(Subscribed {
        pubsub,
        connection,
        version,
        state,
    })
}

/// A client for the node the notices go through: the primary, or in a
/// Cluster the node serving the channel's slot (every subscriber and every
/// publisher meet there, so the count of receivers is every instance's).
async fn subscriber(store: &RedisStore) -> Result<Client, Error> {
    match &store.inner.backend {
        Backend::Primary(primary) => primary.client().await,
        Backend::Cluster(cluster) => {
            drop(store.cluster(cluster).await?);
            cluster.channel_node(CHANNEL)
        }
    }
}
