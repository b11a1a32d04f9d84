//! Concurrency permits on Redis: leases in a sorted set per key, taken,
//! renewed and given back by `concurrency.lua`.

use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::RedisStore;
use super::scripts::{self, PermitOp};
use limiter_core::Error;
use limiter_core::backend::permit_decision;
use limiter_core::{Acquired, ConcurrencyLimit, Permit};

/// The counter of leases this process has lost: renewed too late, its
/// request was no longer counted.
const LOST: &str = "limiter_permits_lost_total";

/// Makes this process's permit ids unlike any other's.
static NONCE: LazyLock<u64> = LazyLock::new(|| {
    let seed = (std::process::id(), std::time::SystemTime::now());
    foldhash::fast::RandomState::default().hash_one(seed)
});

fn next_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{:016x}-{}", *NONCE, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Renews a permit's lease every third of it while the permit is held (the
/// task is aborted when the permit is dropped).
async fn renew(store: RedisStore, key: Box<str>, id: String, limit: ConcurrencyLimit) {
    let every = limit.lease() / 3;
    loop {
        tokio::time::sleep(every).await;
        let reply = permit_script(&store, &key, PermitOp::Renew, &id, &limit, None).await;
        match reply.as_deref() {
            Ok([1]) => {}
            Ok(_) => {
                metrics::counter!(LOST).increment(1);
                tracing::warn!(
                    key = &*key,
                    "a permit's lease ended before it was renewed: its request is no longer counted"
                );
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "renewing a permit's lease failed; trying again");
            }
        }
    }
}

/// Gives a permit back in a task of its own (a drop cannot wait); outside a
/// Tokio runtime its lease expires instead.
fn give_back(store: RedisStore, key: Box<str>, id: String, limit: ConcurrencyLimit) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let reply = permit_script(&store, &key, PermitOp::Release, &id, &limit, None).await;
        if let Err(error) = reply {
            tracing::warn!(%error, "giving a permit back failed: its lease will expire");
        }
    });
}

/// Gives back a permit whose acquisition may have run, unless disarmed.
struct Undo {
    store: RedisStore,
    key: Box<str>,
    id: String,
    limit: ConcurrencyLimit,
    armed: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if self.armed {
            give_back(
                self.store.clone(),
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.id),
                self.limit,
            );
        }
    }
}

/// Takes a permit; with `now`, at that time (a test's) and without
/// renewing it (Redis's clock does not follow a test's time).
pub(crate) async fn acquire_permit_at_time(
    store: &RedisStore,
    key: &str,
    limit: &ConcurrencyLimit,
    now: Option<u64>,
) -> Result<Acquired, Error> {
    let id = next_id();
    // Until an answer says what happened, the call may have taken the
    // permit: a future dropped (the request cancelled) or a call that
    // failed gives it back.
    let mut undo = Undo {
        store: store.clone(),
        key: key.into(),
        id,
        limit: *limit,
        armed: true,
    };
    let reply = permit_script(store, key, PermitOp::Acquire, &undo.id, limit, now).await?;
    let held = match *reply.as_slice() {
        [granted @ (0 | 1), held] if held >= 0 => (granted == 1, held as u64),
        _ => return Err(Error::Protocol(format!("permit reply {reply:?}"))),
    };
    undo.armed = false;
    let (granted, held) = held;
    if !granted {
        return Ok(Acquired::Denied(permit_decision(limit, 0, true)));
    }
    let granted = permit_decision(limit, limit.max().saturating_sub(held), false);
    let (key, id) = (std::mem::take(&mut undo.key), std::mem::take(&mut undo.id));
    let release = {
        let (store, key, id, limit) = (store.clone(), key.clone(), id.clone(), *limit);
        move || give_back(store, key, id, limit)
    };
    let permit = Permit::new(granted, release);
    if now.is_some() {
        return Ok(Acquired::Permit(permit));
    }
    let renewal = tokio::spawn(renew(store.clone(), key, id, *limit));
    Ok(Acquired::Permit(permit.renewed_by(renewal.abort_handle())))
}

/// One call of the concurrency script, within the response timeout.
pub(crate) async fn permit_script(
    store: &RedisStore,
    key: &str,
    op: PermitOp,
    id: &str,
    limit: &ConcurrencyLimit,
    now: Option<u64>,
) -> Result<Vec<i64>, Error> {
    let lua = scripts::concurrency();
    let call = scripts::permit_call(key, op, id, limit, now);
    let config = &store.inner.config;
    let run = store.call(lua, &call);
    tokio::time::timeout(config.response_timeout, run)
        .await
        .unwrap_or(Err(Error::Timeout(config.response_timeout)))
}
