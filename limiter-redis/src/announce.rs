//! Resets announced to every instance: a reset deletes the key, then
//! publishes it on [`CHANNEL`]; each instance's subscription tells what it
//! registered ([`AnnouncesResets`]) to forget the key, and acknowledges. The
//! reset's caller is answered once every instance subscribed when it was
//! published has acknowledged (or its deadline has passed), so the next
//! request anywhere is decided on the reset state.
//!
//! An instance whose subscription broke forgets everything it remembers
//! when it is back: notices may have been missed meanwhile.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use limiter_core::{AnnouncesResets, Error, Forget, Forgetter};
use redis::{Client, ConnectionAddr, Msg};
use tokio::sync::Notify;

use super::link::lock;
use super::store::{Backend, Inner};
use super::{RedisStore, scripts};

/// The channel of the notices: `r {id} {key}` (reset), `a {id}` (acknowledged).
pub(crate) const CHANNEL: &str = "limiter:resets";
/// The longest pause between two attempts to subscribe again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What one store (and its clones) does for announced resets.
#[derive(Default)]
pub(crate) struct Announcer {
    forgetters: Mutex<Vec<Forgetter>>,
    subscribed: AtomicBool,
    /// The resets this instance published, by id: the acknowledgements seen.
    pending: Mutex<HashMap<u64, Arc<Pending>>>,
}

#[derive(Default)]
struct Pending {
    acks: AtomicUsize,
    notify: Notify,
}

impl AnnouncesResets for RedisStore {
    fn on_reset(&self, forget: Forgetter) {
        lock(&self.inner.announcer.forgetters).push(forget);
        self.subscribe();
    }
}

impl RedisStore {
    /// Starts the subscription, unless it runs (or there is no runtime to
    /// run it on yet: the next reset or registration starts it).
    pub(crate) fn subscribe(&self) {
        let announcer = &self.inner.announcer;
        if announcer.subscribed.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if announcer.subscribed.swap(true, Ordering::AcqRel) {
            return;
        }
        runtime.spawn(listen(Arc::downgrade(&self.inner)));
    }

    /// Deletes `key`, then announces it and waits for every subscribed
    /// instance to acknowledge, within the response timeout.
    pub(super) async fn reset_and_announce(&self, key: &str) -> Result<(), Error> {
        self.subscribe();
        let reset = scripts::reset();
        self.bounded_call(reset, &reset.call(key)).await?;
        let id = foldhash::fast::RandomState::default().hash_one(key);
        let pending = Arc::new(Pending::default());
        let announcer = &self.inner.announcer;
        lock(&announcer.pending).insert(id, Arc::clone(&pending));
        let _unregister = Unregister(announcer, id);
        let publish = scripts::publish();
        let mut call = publish.call(CHANNEL);
        call.arg(format!("r {id} {key}"));
        let receivers = self.bounded_call(publish, &call).await?;
        let receivers = usize::try_from(receivers.first().copied().unwrap_or(0)).unwrap_or(0);
        let acknowledged = async {
            loop {
                let notified = pending.notify.notified();
                if pending.acks.load(Ordering::Acquire) >= receivers {
                    return;
                }
                notified.await;
            }
        };
        let deadline = self.inner.config.response_timeout;
        if tokio::time::timeout(deadline, acknowledged).await.is_err() {
            tracing::warn!(
                key,
                receivers,
                acknowledged = pending.acks.load(Ordering::Relaxed),
                "not every instance acknowledged a reset within the deadline: \
                 those forget the key when its notice reaches them"
            );
        }
        Ok(())
    }
}

/// Takes a reset's id out of the pending ones, however its wait ends.
struct Unregister<'a>(&'a Announcer, u64);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        lock(&self.0.pending).remove(&self.1);
    }
}

/// The subscription: runs while the store does.
async fn listen(inner: Weak<Inner>) {
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
            Ok(pubsub) => {
                backoff = Duration::from_millis(50);
                if !first {
                    forget(&store, &Forget::Everything);
                }
                first = false;
                drop(store);
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
                        return;
                    };
                    on_message(&store, &message).await;
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

/// A subscription to [`CHANNEL`] on the node the notices go through.
async fn subscribe_at(store: &RedisStore) -> Result<redis::aio::PubSub, Error> {
    let client = subscriber(store).await?;
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .map_err(crate::redis_error)?;
    pubsub
        .subscribe(CHANNEL)
        .await
        .map_err(crate::redis_error)?;
    Ok(pubsub)
}

/// A notice: a reset is forgotten here, then acknowledged; an
/// acknowledgement of a reset of this instance is counted.
async fn on_message(store: &RedisStore, message: &Msg) {
    let Ok(payload) = message.get_payload::<String>() else {
        return;
    };
    let mut parts = payload.splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("r"), Some(id), Some(key)) => {
            forget(store, &Forget::Key(key.into()));
            let publish = scripts::publish();
            let mut call = publish.call(CHANNEL);
            call.arg(format!("a {id}"));
            if let Err(error) = store.bounded_call(publish, &call).await {
                tracing::warn!(%error, "a reset could not be acknowledged");
            }
        }
        (Some("a"), Some(id), None) => {
            let Ok(id) = id.parse::<u64>() else { return };
            let pending = lock(&store.inner.announcer.pending).get(&id).cloned();
            if let Some(pending) = pending {
                pending.acks.fetch_add(1, Ordering::AcqRel);
                pending.notify.notify_waiters();
            }
        }
        _ => {}
    }
}

/// Tells every registered owner to forget; drops those that are gone.
fn forget(store: &RedisStore, what: &Forget) {
    lock(&store.inner.announcer.forgetters).retain(|forget| forget(what));
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

/// `host:port` as a connection address.
pub(crate) fn tcp(address: &str) -> Option<ConnectionAddr> {
    let (host, port) = address.rsplit_once(':')?;
    Some(ConnectionAddr::Tcp(host.to_owned(), port.parse().ok()?))
}
