//! Resets announced to every instance: a reset deletes the key, then
//! publishes it on [`CHANNEL`]; each instance's subscription tells what it
//! registered ([`AnnouncesResets`]) to forget the key, and acknowledges. The
//! reset's caller is answered once every instance subscribed when it was
//! published has acknowledged (or its deadline has passed), so the next
//! request anywhere is decided on the reset state.
//!
//! Blocks, plan assignments and overrides travel the same way: kept in Redis (the
//! blocks as `blocks.rs` says, the plans in the hash [`PLANS`]), applied to
//! each instance's local copy (which a request reads without a call) by
//! their notices, and read whole at every subscription.
//!
//! An instance whose subscription broke forgets everything it remembers
//! when it is back, and reads the blocks and plans again: notices may have
//! been missed meanwhile.
//!
//! A change whose call failed may still run when Redis answers again, with
//! no notice: the subscription also polls a version hash ([`VERSION`]) that
//! such a change bumps (see `reconcile.rs`), so it ends up in effect on
//! every instance or on none.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use limiter_core::{AnnouncesResets, BlockOrigin, Clock, Error, Forget, Forgetter, SystemClock};
use redis::{ConnectionAddr, Msg};
use tokio::sync::Notify;

use super::link::lock;
use super::reconcile::{Recounts, ResetInFlight, unconfirmed};
use super::{RedisStore, scripts, subscription};

/// The channel of the notices: `r {id} {key}` (reset), `b {id} {µs} {key}`
/// (blocked by an operator), `e {id} {µs} {key}` (a block earned by a
/// penalty), `u {id} {key}` (unblocked), `p {id} ={plan} {key}` (a plan,
/// empty for the default), `o {id} {µs} {limit} {override}` (an override;
/// `o {id} 0 {limit}` ends it), and `a {id}` (acknowledged).
pub(crate) const CHANNEL: &str = "limiter:resets";
/// The hash of keys and the plan each has, in the same slot.
pub(crate) const PLANS: &str = "{limiter:resets}:plans";
/// The hash counting changes that every instance polls (`changes`: blocks,
/// unblocks, plans; `resets`: failed resets), in the same slot: see
/// `reconcile.rs`.
pub(crate) const VERSION: &str = "{limiter:resets}:version";

/// What one store (and its clones) does for announced resets.
pub(crate) struct Announcer {
    forgetters: Mutex<Vec<Forgetter>>,
    subscribed: AtomicBool,
    /// The ids of this instance's notices: a random start, then counted up,
    /// so no two notices in flight share one.
    next_id: AtomicU64,
    /// The resets this instance published, by id: the acknowledgements seen.
    pending: Mutex<HashMap<u64, Arc<Pending>>>,
    /// The failed resets waiting to be counted in [`VERSION`].
    pub(crate) recounts: Recounts,
    /// Whether a subscription has read the blocks, plans and overrides
    /// whole once, and who waits for it ([`RedisStore::synced`]).
    synced: AtomicBool,
    synced_notify: Notify,
}

impl Default for Announcer {
    fn default() -> Self {
        let seed = foldhash::fast::RandomState::default().hash_one(SystemClock.now_micros());
        Self {
            forgetters: Mutex::default(),
            subscribed: AtomicBool::new(false),
            next_id: AtomicU64::new(seed),
            pending: Mutex::default(),
            recounts: Recounts::default(),
            synced: AtomicBool::new(false),
            synced_notify: Notify::new(),
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

impl Announcer {
    /// A subscription has read the shared state whole.
    pub(crate) fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
        self.synced_notify.notify_waiters();
    }
}

impl RedisStore {
    /// Waits, at most `within`, until this store's subscription has read
    /// the blocks, plans and live overrides that Redis holds, so that a
    /// starting instance decides its first requests by them; answers
    /// whether it has. An application calls it once when it starts (the UGC
    /// server does); an instance that does not know them yet (Redis is
    /// down) answers by the compiled limits until its subscription reads
    /// them.
    pub async fn synced(&self, within: Duration) -> bool {
        self.subscribe();
        let announcer = &self.inner.announcer;
        let read = async {
            loop {
                let notified = announcer.synced_notify.notified();
                if announcer.synced.load(Ordering::Acquire) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(within, read).await.is_ok()
    }

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
        runtime.spawn(subscription::listen(Arc::downgrade(&self.inner)));
    }

    /// Deletes `key`, then announces it and waits for every subscribed
    /// instance to acknowledge, within the response timeout. A reset that
    /// fails (or is dropped) before it is announced is counted in
    /// [`VERSION`], so every instance forgets everything (`reconcile.rs`).
    pub(super) async fn reset_and_announce(&self, key: &str) -> Result<(), Error> {
        self.subscribe();
        let in_flight = ResetInFlight::new(self);
        let reset = scripts::reset();
        (self.bounded_call(reset, &reset.call(key)).await).map_err(unconfirmed)?;
        self.announce("r", key).await.map_err(unconfirmed)?;
        in_flight.confirm();
        Ok(())
    }

    /// Tells every instance using this Redis that `key` was reset, without
    /// touching the key: for a store built on this crate whose state of the
    /// key this store does not hold (the regional store resets its own
    /// hash, then tells each region's instances, so that what they remember
    /// of the key, a denial in a deny cache, goes too). Answered once every
    /// subscribed instance has forgotten it; [`Error::Unconfirmed`] as for a
    /// reset.
    pub async fn announce_reset(&self, key: &str) -> Result<(), Error> {
        self.subscribe();
        let in_flight = ResetInFlight::new(self);
        self.announce("r", key).await.map_err(unconfirmed)?;
        in_flight.confirm();
        Ok(())
    }

    /// Gives `key` the plan `plan` (`None`: the default) in the plans'
    /// hash, here, then on every instance; counted in [`VERSION`] by the
    /// same script.
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
        self.subscribe();
        let assign = scripts::assign();
        let mut call = scripts::versioned(assign, PLANS, VERSION);
        call.arg(key).arg(plan.unwrap_or(""));
        (self.bounded_call(assign, &call).await).map_err(unconfirmed)?;
        plans.assign(key, plan)?;
        (self
            .announce("p", &format!("={} {key}", plan.unwrap_or("")))
            .await)
            .map_err(unconfirmed)
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

/// A notice: a reset is forgotten here, then acknowledged; an
/// acknowledgement of a reset of this instance is counted.
pub(crate) async fn on_message(store: &RedisStore, message: &Msg) {
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
        (Some("o"), Some(id), Some(rest)) => {
            crate::overrides::apply_notice(&store.inner.overrides, rest);
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
pub(crate) fn forget(store: &RedisStore, what: &Forget) {
    lock(&store.inner.announcer.forgetters).retain(|forget| forget(what));
}

/// `host:port` as a connection address.
pub(crate) fn tcp(address: &str) -> Option<ConnectionAddr> {
    let (host, port) = address.rsplit_once(':')?;
    Some(ConnectionAddr::Tcp(host.to_owned(), port.parse().ok()?))
}
