//! Each instance's subscription to the notices (`notice.rs`, sent by
//! `announce.rs`): made again whenever it breaks, with the blocks, plans
//! and overrides read whole each time (`replica.rs`), each notice applied
//! and acknowledged, and the version hash polled between notices
//! (`reconcile.rs`). A notice this version does not read (a newer
//! version's) makes it read everything again rather than guess. Behind
//! Sentinel it follows the primary: made again on
//! the new one as soon as a Sentinel names it (or a call reaches it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use limiter_core::{Error, Forget};
use redis::{Client, Msg};

use tokio::sync::watch;

use super::multiplexed::Address;
use super::notice::{CHANNEL, Notice};
use super::primary::address;
use super::reconcile::{self, POLL_INTERVAL, Version};
use super::replica::{self, SharedState};
use super::store::{Backend, Inner};
use super::{RedisStore, scripts};

/// The longest pause between two attempts to subscribe again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How often notices this version does not read make it read everything
/// again, at most.
const REREAD_AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// The subscription: runs while the store does.
pub(crate) async fn listen(inner: Weak<Inner>) {
    let mut backoff = Duration::from_millis(50);
    let mut first = true;
    // A notice this version does not read: acknowledged once everything
    // is read again; such re-readings at most once a second.
    let mut unread: Option<String> = None;
    let mut last_reread: Option<tokio::time::Instant> = None;
    loop {
        let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
            return;
        };
        let timeout = store.inner.config.connection_timeout;
        // Behind Sentinel, read before subscribing: a primary named
        // meanwhile moves the subscription.
        let mut named = match &store.inner.backend {
            Backend::Primary(primary) => {
                primary.watch(&store.inner.config);
                primary.named()
            }
            Backend::Cluster(_) => None,
        };
        if let Some(named) = &mut named {
            named.borrow_and_update();
        }
        let subscribed = tokio::time::timeout(timeout, subscribe_at(&store))
            .await
            .unwrap_or(Err(Error::Timeout(timeout)));
        match subscribed {
            Ok(Subscribed {
                pubsub,
                connection,
                node,
                version,
                state,
            }) => {
                backoff = Duration::from_millis(50);
                state.apply(&store);
                store.inner.announcer.mark_synced();
                if let Some(id) = unread.take() {
                    acknowledge(&store, &id).await;
                }
                if !first {
                    store.inner.announcer.forget(&Forget::Everything);
                }
                first = false;
                drop(store);
                let moved = Moved { named, node };
                match follow(&inner, pubsub, connection, version, moved).await {
                    Followed::StoreGone => return,
                    Followed::Lost => {
                        tracing::warn!("the subscription to resets was lost: subscribing again")
                    }
                    Followed::Moved => {
                        tracing::warn!("the primary moved: subscribing to resets on the new one")
                    }
                    Followed::Unread(id) => {
                        tracing::warn!(
                            "a notice this version does not read: reading the blocks, plans \
                             and overrides again rather than guess"
                        );
                        unread = id;
                        if let Some(last) = last_reread {
                            tokio::time::sleep_until(last + REREAD_AT_MOST_EVERY).await;
                        }
                        last_reread = Some(tokio::time::Instant::now());
                    }
                }
                continue;
            }
            Err(error) => tracing::debug!(%error, "not subscribed to resets yet"),
        }
        drop(store);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// How following a subscription ended.
enum Followed {
    /// The subscription or the poll's connection broke: subscribe again.
    Lost,
    /// A notice this version does not read (a newer version's, or one
    /// garbled): read everything again, then acknowledge it (its id).
    Unread(Option<String>),
    /// The primary is now another node: subscribe there.
    Moved,
    /// The store was dropped.
    StoreGone,
}

/// Where the subscription is, and where the primary is as last learned
/// (behind Sentinel).
struct Moved {
    named: Option<watch::Receiver<Option<Address>>>,
    node: Option<Address>,
}

impl Moved {
    /// Resolves once the primary is learned to be another node than the
    /// subscription's; never without Sentinel, or once the store is gone.
    async fn away(&mut self) {
        let Some(named) = &mut self.named else {
            return std::future::pending().await;
        };
        loop {
            if named.changed().await.is_err() {
                return std::future::pending().await;
            }
            let moved = named.borrow_and_update().as_ref() != self.node.as_ref();
            if moved {
                return;
            }
        }
    }
}

/// Applies the notices of a subscription, and polls the version hash
/// between them (`reconcile.rs`), until the subscription or the poll's
/// connection breaks, the primary moves, or the store is gone.
async fn follow(
    inner: &Weak<Inner>,
    pubsub: redis::aio::PubSub,
    mut connection: redis::aio::MultiplexedConnection,
    mut version: Version,
    mut moved: Moved,
) -> Followed {
    let mut messages = pubsub.into_on_message();
    let mut polls = tokio::time::interval(POLL_INTERVAL);
    polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    polls.reset();
    loop {
        tokio::select! {
            message = messages.next() => {
                let Some(message) = message else { return Followed::Lost };
                let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
                    return Followed::StoreGone;
                };
                if let Handled::Unread(id) = on_message(&store, &message).await {
                    return Followed::Unread(id);
                }
            }
            () = moved.away() => return Followed::Moved,
            _ = polls.tick() => {
                let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
                    return Followed::StoreGone;
                };
                match reconcile::poll(&store, &mut connection, &mut version).await {
                    Ok(()) => {}
                    // Redis is slow or hung: the next poll tries again.
                    Err(error @ Error::Timeout(_)) => {
                        tracing::debug!(%error, "the version of blocks and plans was not read");
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the version of blocks and plans cannot be read");
                        return Followed::Lost;
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
    /// The node subscribed to.
    node: Option<Address>,
    version: Version,
    state: SharedState,
}

/// Subscribes to [`CHANNEL`], then reads the version hash, then the
/// blocks and plans (a change between the two readings is read again at
/// the first poll).
async fn subscribe_at(store: &RedisStore) -> Result<Subscribed, Error> {
    let client = subscriber(store).await?;
    let node = address(client.get_connection_info());
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
    let state = SharedState::read(store, &mut connection).await?;
    Ok(Subscribed {
        pubsub,
        connection,
        node,
        version,
        state,
    })
}

/// A client for the node the notices go through: the primary (behind
/// Sentinel, the node last learned to be the primary), or in a
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

/// What became of a notice.
enum Handled {
    Applied,
    /// Not read by this version: its id, when it has one.
    Unread(Option<String>),
}

/// A notice: applied to this instance's copy (a reset forgotten), then
/// acknowledged; an acknowledgement of a notice of this instance counted.
async fn on_message(store: &RedisStore, message: &Msg) -> Handled {
    let Ok(payload) = message.get_payload::<String>() else {
        return Handled::Unread(None);
    };
    let Some(notice) = Notice::parse(&payload) else {
        // `{kind} {id} ...`, as every notice opens.
        let id = payload.split(' ').nth(1).map(str::to_owned);
        return Handled::Unread(id);
    };
    match notice {
        Notice::Ack { id } => {
            store.inner.announcer.acknowledged(id);
            return Handled::Applied;
        }
        Notice::Reset { key, .. } => store.inner.announcer.forget(&Forget::Key(key.into())),
        _ => replica::apply(store, &notice),
    }
    if let Some(id) = notice.id() {
        acknowledge(store, id).await;
    }
    Handled::Applied
}

/// Tells the notice's sender that this instance applied the notice `id`.
async fn acknowledge(store: &RedisStore, id: &str) {
    let publish = scripts::publish();
    let mut call = publish.call(CHANNEL);
    call.arg(format!("a {id}"));
    if let Err(error) = store.bounded_call(publish, &call).await {
        tracing::warn!(%error, "a notice could not be acknowledged");
    }
}

/// Starts the subscription, unless it runs (or there is no runtime to
/// run it on yet: the next reset or registration starts it).
pub(crate) fn subscribe(store: &RedisStore) {
    let announcer = &store.inner.announcer;
    if announcer.subscribed.load(Ordering::Acquire) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if announcer.subscribed.swap(true, Ordering::AcqRel) {
        return;
    }
    runtime.spawn(listen(Arc::downgrade(&store.inner)));
}
