//! Resets announced to every instance: a reset deletes the key, then
//! publishes it on [`CHANNEL`]; each instance's subscription tells what it
//! registered (`SharedControl::on_reset`) to forget the key, and acknowledges. The
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
//! every instance or on none. A reset cannot count itself there (its key
//! is in another slot of a Cluster): the instance whose reset failed counts
//! it, here.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use limiter_core::Error;

use super::announcer::{Announcer, Pending};
use super::link::lock;
use super::notice::{CHANNEL, PLANS, VERSION, unconfirmed};
use super::store::Inner;
use super::subscription;
use super::{RedisStore, scripts};

/// Takes a reset's id out of the pending ones, however its wait ends.
struct Unregister<'a>(&'a Announcer, u64);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        lock(&self.0.pending).remove(&self.1);
    }
}

/// The longest pause between two attempts to count a failed reset.
pub(crate) const MAX_RECOUNT_BACKOFF: Duration = Duration::from_millis(500);
/// When a failed reset is counted once more after Redis first answered.
pub(crate) const RECOUNT_AFTER: Duration = Duration::from_secs(1);

/// A reset in flight: unless [confirmed](Self::confirm), counted as failed
/// when dropped, whether it failed or its caller gave up on it.
pub(crate) struct ResetInFlight<'a> {
    store: &'a RedisStore,
    confirmed: bool,
}

impl<'a> ResetInFlight<'a> {
    /// A reset starting on `store`.
    pub(crate) fn new(store: &'a RedisStore) -> Self {
        Self {
            store,
            confirmed: false,
        }
    }

    /// The reset ran and every instance was told.
    pub(crate) fn confirm(mut self) {
        self.confirmed = true;
    }
}

impl Drop for ResetInFlight<'_> {
    fn drop(&mut self) {
        if !self.confirmed {
            count_failed_reset(self.store);
        }
    }
}

/// Counts a failed reset in the version hash, in a task (one per store at
/// a time, which counts every failure it finds).
fn count_failed_reset(store: &RedisStore) {
    let recounts = &store.inner.announcer.recounts;
    recounts.failed.fetch_add(1, Ordering::AcqRel);
    if recounts.running.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        recounts.running.store(false, Ordering::Release);
        return;
    };
    runtime.spawn(recount(Arc::downgrade(&store.inner)));
}

/// The counting task: counts until Redis answers, once more a moment
/// later, and again while failures came meanwhile; ends with the store.
async fn recount(inner: Weak<Inner>) {
    loop {
        let Some(counted) = inner
            .upgrade()
            .map(|inner| inner.announcer.recounts.failed.load(Ordering::Acquire))
        else {
            return;
        };
        if !count_until_answered(&inner).await {
            return;
        }
        tokio::time::sleep(RECOUNT_AFTER).await;
        if !count_until_answered(&inner).await {
            return;
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let recounts = &inner.announcer.recounts;
        recounts.running.store(false, Ordering::Release);
        // A failure that came after `counted` was read, and saw this task
        // running, is this task's to count.
        if recounts.failed.load(Ordering::Acquire) == counted
            || recounts.running.swap(true, Ordering::AcqRel)
        {
            return;
        }
    }
}

/// Counts one failed reset, trying again until Redis answers; `false` once
/// the store is gone.
async fn count_until_answered(inner: &Weak<Inner>) -> bool {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(store) = inner.upgrade().map(|inner| RedisStore { inner }) else {
            return false;
        };
        let bump = scripts::bump();
        let mut call = bump.call(VERSION);
        call.arg("resets");
        match store.bounded_call(bump, &call).await {
            Ok(_) => return true,
            Err(error) => tracing::debug!(%error, "a failed reset is not counted yet"),
        }
        drop(store);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_RECOUNT_BACKOFF);
    }
}

/// Deletes `key`, then announces it and waits for every subscribed
/// instance to acknowledge, within the response timeout. A reset that
/// fails (or is dropped) before it is announced is counted in
/// [`VERSION`], so every instance forgets everything (`reconcile.rs`).
pub(crate) async fn reset_and_announce(store: &RedisStore, key: &str) -> Result<(), Error> {
    subscription::subscribe(store);
    let in_flight = ResetInFlight::new(store);
    let reset = scripts::reset();
    (store.bounded_call(reset, &reset.call(key)).await).map_err(unconfirmed)?;
    announce(store, "r", key).await.map_err(unconfirmed)?;
    in_flight.confirm();
    Ok(())
}

/// Gives `key` the plan `plan` (`None`: the default) in the plans'
/// hash, here, then on every instance; counted in [`VERSION`] by the
/// same script.
pub(crate) async fn assign_and_announce(
    store: &RedisStore,
    key: &str,
    plan: Option<&str>,
) -> Result<(), Error> {
    let plans = &store.inner.tables.plans();
    if plan.is_some() && plans.get(key).is_none() && plans.len() >= limiter_core::MAX_ASSIGNED_PLANS
    {
        return plans.assign(key, plan);
    }
    subscription::subscribe(store);
    let assign = scripts::assign();
    let mut call = scripts::versioned(assign, PLANS, VERSION);
    call.arg(key).arg(plan.unwrap_or(""));
    (store.bounded_call(assign, &call).await).map_err(unconfirmed)?;
    plans.assign(key, plan)?;
    (announce(store, "p", &format!("={} {key}", plan.unwrap_or(""))).await).map_err(unconfirmed)
}

/// Publishes `{kind} {id} {rest}` and waits for every instance
/// subscribed when it was published to acknowledge it, within the
/// response timeout.
pub(crate) async fn announce(store: &RedisStore, kind: &str, rest: &str) -> Result<(), Error> {
    subscription::subscribe(store);
    let id = store
        .inner
        .announcer
        .next_id
        .fetch_add(1, Ordering::Relaxed);
    let pending = Arc::new(Pending::default());
    let announcer = &store.inner.announcer;
    lock(&announcer.pending).insert(id, Arc::clone(&pending));
    let _unregister = Unregister(announcer, id);
    let publish = scripts::publish();
    let mut call = publish.call(CHANNEL);
    call.arg(format!("{kind} {id} {rest}"));
    let receivers = store.bounded_call(publish, &call).await?;
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
    let deadline = store.inner.config.response_timeout;
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
