//! Resets announced to every instance: a reset deletes the key, then
//! publishes it on [`CHANNEL`]; each instance's subscription tells what it
//! registered ([`AnnouncesResets`]) to forget the key, and acknowledges. The
//! reset's caller is answered once every instance subscribed when it was
//! published has acknowledged (or its deadline has passed), so the next
//! request anywhere is decided on the reset state.
//!
//! Blocks and plan assignments travel the same way: kept in Redis (the
//! blocks as `blocks.rs` says, the plans in the hash [`PLANS`]), applied to
//! each instance's local copy (which a request reads without a call) by
//! their notices, and read whole at every subscription.
//!
//! An instance whose subscription broke forgets everything it remembers
//! when it is back, and reads the blocks and plans again: notices may have
//! been missed meanwhile.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use limiter_core::{AnnouncesResets, BlockOrigin, Clock, Error, Forget, Forgetter, SystemClock};
use redis::{Client, ConnectionAddr, Msg};
use tokio::sync::Notify;

use super::link::lock;
use super::store::{Backend, Inner};
use super::{RedisStore, scripts};

/// The channel of the notices: `r {id} {key}` (reset), `b {id} {µs} {key}`
/// (blocked by an operator), `e {id} {µs} {key}` (a block earned by a
/// penalty), `u {id} {key}` (unblocked), `p {id} ={plan} {key}` (a plan,
/// empty for the default), and `a {id}` (acknowledged).
pub(crate) const CHANNEL: &str = "limiter:resets";
/// The hash of keys and the plan each has, in the same slot.
pub(crate) const PLANS: &str = "{limiter:resets}:plans";
/// The longest pause between two attempts to subscribe again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What one store (and its clones) does for announced resets.
pub(crate) struct Announcer {
    forgetters: Mutex<Vec<Forgetter>>,
    subscribed: AtomicBool,
    /// The ids of this instance's notices: a random start, then counted up,
    /// so no two notices in flight share one.
    next_id: AtomicU64,
    /// The resets this instance published, by id: the acknowledgements seen.
    pending: Mutex<HashMap<u64, Arc<Pending>>>,
}

impl Default for Announcer {
    fn default() -> Self {
        let seed = foldhash::fast::RandomState::default().hash_one(SystemClock.now_micros());
        Self {
            forgetters: Mutex::default(),
            subscribed: AtomicBool::new(false),
            next_id: AtomicU64::new(seed),
            pending: Mutex::default(),
        }
    }
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
        let reset = scripts::reset();
        self.bounded_call(reset, &reset.call(key)).await?;
        self.announce("r", key).await
    }

    /// Gives `key` the plan `plan` (`None`: the default) in the plans'
    /// hash, here, then on every instance.
    pub(super) async fn assign_and_announce(
        &self,
        key: &str,
        plan: Option<&str>,
    ) -> Result<(), Error> {
        let plans = &self.inner.plans;
        if plan.is_some()
            && plans.get(key).is_none()
            && plans.len() >= limiter_core::MAX_ASSIGNED_PLANS
        {
            return plans.assign(key, plan);
        }
        let assign = scripts::assign();
        let mut call = assign.call(PLANS);
        call.arg(key).arg(plan.unwrap_or(""));
        self.bounded_call(assign, &call).await?;
        plans.assign(key, plan)?;
        self.announce("p", &format!("={} {key}", plan.unwrap_or("")))
            .await
    }

    /// Publishes `{kind} {id} {rest}` and waits for every instance
    /// subscribed when it was published to acknowledge it, within the
    /// response timeout.
    pub(crate) async fn announce(&self, kind: &str, rest: &str) -> Result<(), Error> {
        self.subscribe();
        let id = self.inner.announcer.next_id.fetch_add(1, Ordering::Relaxed);
        let pending = Arc::new(Pending::default());
        let announcer = &self.inner.announcer;
        lock(&announcer.pending).insert(id, Arc::clone(&pending));
        let _unregister = Unregister(announcer, id);
        let publish = scripts::publish();
        let mut call = publish.call(CHANNEL);
        call.arg(format!("{kind} {id} {rest}"));
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
                notice = rest,
                receivers,
                acknowledged = pending.acks.load(Ordering::Relaxed),
                "not every instance acknowledged a notice within the deadline: \
                 those apply it when it reaches them"
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
            Ok((pubsub, blocks, plans)) => {
                backoff = Duration::from_millis(50);
                store.inner.blocks.replace(blocks, SystemClock.now_micros());
                store.inner.plans.replace(plans);
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

/// A subscription to [`CHANNEL`] on the node the notices go through, and
/// the blocks (key, time left, origin: at most the penalty bound of
/// penalty blocks) that node holds once subscribed: a notice
/// published after the reading is received, one before is in it.
#[allow(clippy::type_complexity)]
async fn subscribe_at(
    store: &RedisStore,
) -> Result<
    (
        redis::aio::PubSub,
        Vec<(String, Duration, BlockOrigin)>,
        Vec<(String, String)>,
    ),
    Error,
> {
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
    let blocks = crate::blocks::load(store, &mut connection).await?;
    let plans: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(PLANS)
        .query_async(&mut connection)
        .await
        .map_err(crate::redis_error)?;
    Ok((pubsub, blocks, plans.into_iter().collect()))
}

/// A notice: a reset is forgotten here, then acknowledged; an
/// acknowledgement of a reset of this instance is counted.
async fn on_message(store: &RedisStore, message: &Msg) {
    let Ok(payload) = message.get_payload::<String>() else {
        return;
    };
    let mut parts = payload.splitn(3, ' ');
    let blocks = &store.inner.blocks;
    let applied = match (parts.next(), parts.next(), parts.next()) {
        (Some("r"), Some(id), Some(key)) => {
            forget(store, &Forget::Key(key.into()));
            id
        }
        (Some(kind @ ("b" | "e")), Some(id), Some(rest)) => {
            let Some((left, key)) = rest.split_once(' ') else {
                return;
            };
            let Ok(left) = left.parse::<u64>() else {
                return;
            };
            let origin = match kind {
                "b" => BlockOrigin::Operator,
                _ => BlockOrigin::Penalty,
            };
            let left = Duration::from_micros(left);
            let blocked = blocks.block(key, left, origin, SystemClock.now_micros());
            if let Err(error) = blocked {
                tracing::warn!(%error, "a block could not be kept here");
            }
            id
        }
        (Some("u"), Some(id), Some(key)) => {
            blocks.unblock(key);
            id
        }
        (Some("p"), Some(id), Some(rest)) => {
            let Some((plan, key)) = rest.split_once(' ') else {
                return;
            };
            let plan = plan.strip_prefix('=').filter(|p| !p.is_empty());
            if let Err(error) = store.inner.plans.assign(key, plan) {
                tracing::warn!(%error, "a plan could not be kept here");
            }
            id
        }
        (Some("a"), Some(id), None) => {
            let Ok(id) = id.parse::<u64>() else { return };
            let pending = lock(&store.inner.announcer.pending).get(&id).cloned();
            if let Some(pending) = pending {
                pending.acks.fetch_add(1, Ordering::AcqRel);
                pending.notify.notify_waiters();
            }
            return;
        }
        _ => return,
    };
    let publish = scripts::publish();
    let mut call = publish.call(CHANNEL);
    call.arg(format!("a {applied}"));
    if let Err(error) = store.bounded_call(publish, &call).await {
        tracing::warn!(%error, "a notice could not be acknowledged");
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
