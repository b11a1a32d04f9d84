//! An admin change answered with an error ends up in effect on every
//! instance or on none.
//!
//! A block, an unblock, a plan assignment or a reset whose call missed its
//! deadline (Redis hung, say) was written all the same: it runs when Redis
//! resumes. Its notice goes out only once the call answers, so without more
//! the running instances never learn of it while an instance started later
//! reads it: they disagree for as long as the change lasts.
//!
//! What closes that:
//! - The hash [`VERSION`], in the notices' slot, counts changes. Its field
//!   `changes` counts blocks, unblocks and plan assignments, counted by
//!   their scripts themselves in the same step, so a late write counts
//!   itself when it finally runs. A penalty's block is not counted: a
//!   flood of them would have every instance read every block each poll.
//!   Its field `resets` counts resets that failed: a reset's key lives in
//!   another slot of a Cluster, so its script cannot count itself
//!   atomically. The instance whose reset failed (or was cancelled) counts
//!   it instead, retrying every `MAX_RECOUNT_BACKOFF` at most until Redis
//!   answers, then once more `RECOUNT_AFTER` later (`announce.rs`), so a reset that ran
//!   after the first count is forgotten too.
//! - Each instance's subscription task reads the hash every
//!   [`POLL_INTERVAL`] (one `HMGET`, bounded by the interval; not a script,
//!   so it adds no `EVALSHA`). When `changes` moved, the instance reads the
//!   blocks and plans again, as it does when it subscribes (one function,
//!   `SharedState::read`); when `resets` moved, it forgets everything
//!   it remembers (its deny cache, leases, samples), as after a lost
//!   subscription.
//! - The failing call answers [`Error::Unconfirmed`] (`notice.rs`) when the change may
//!   have been made (no answer in time, or a connection that failed after
//!   the call was written).
//!
//! The bound: once Redis answers again, a late change has run (the call was
//! queued before anything sent later on its connection), and every
//! instance sees its count at its next poll, within [`POLL_INTERVAL`], then
//! reads the state in one round trip; a failed reset's count lands within
//! `MAX_RECOUNT_BACKOFF` more. So an unconfirmed change is in effect on
//! every instance, or on none, within 2 s of Redis answering again, and an
//! instance started later reads the same state. Repeating the call makes
//! sure of it: every admin change is idempotent.
//!
//! Left out: on a Cluster whose node holding a reset key hangs longer than
//! the node of the version hash, a reset that runs more than
//! `RECOUNT_AFTER` after the version's node answered again is not
//! counted again: the instances' deny caches may keep a denial of that key
//! until its retry time. Repeating the reset settles it.

use std::time::Duration;

use limiter_core::{Error, Forget};
use redis::aio::MultiplexedConnection;

use super::RedisStore;
use super::notice::VERSION;
use super::replica::SharedState;

/// How often an instance reads the version hash; also the bound of one
/// reading (the version, and the blocks and plans when they changed).
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The counts of the version hash, as an instance last read them (a field
/// not there reads 0: a Redis restarted empty reads as a change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Version {
    changes: i64,
    resets: i64,
}

/// Reads the version hash on `connection` (the subscriber's node).
pub(crate) async fn read_version(connection: &mut MultiplexedConnection) -> Result<Version, Error> {
    let (changes, resets): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
        .arg(VERSION)
        .arg("changes")
        .arg("resets")
        .query_async(connection)
        .await
        .map_err(crate::redis_error)?;
    Ok(Version {
        changes: changes.unwrap_or(0),
        resets: resets.unwrap_or(0),
    })
}

/// One poll: reads the version; when `changes` moved since `seen`, the
/// blocks and plans too, and applies them; when `resets` moved, forgets
/// everything. Within [`POLL_INTERVAL`]: a timeout is
/// [`Error::Timeout`] (the next poll tries again); another error means
/// the connection is lost.
pub(crate) async fn poll(
    store: &RedisStore,
    connection: &mut MultiplexedConnection,
    seen: &mut Version,
) -> Result<(), Error> {
    let reading = async {
        let now = read_version(connection).await?;
        let state = match now.changes == seen.changes {
            true => None,
            false => Some(SharedState::read(store, connection).await?),
        };
        Ok::<_, Error>((now, state))
    };
    let (now, state) = match tokio::time::timeout(POLL_INTERVAL, reading).await {
        Ok(Ok(read)) => read,
        // The connection's own response timeout (redis-rs's) is the same
        // thing: Redis is slow or hung, the connection holds.
        Ok(Err(Error::Backend(error)))
            if error
                .downcast_ref::<redis::RedisError>()
                .is_some_and(redis::RedisError::is_timeout) =>
        {
            return Err(Error::Timeout(POLL_INTERVAL));
        }
        Ok(Err(error)) => return Err(error),
        Err(_) => return Err(Error::Timeout(POLL_INTERVAL)),
    };
    if let Some(state) = state {
        tracing::debug!("blocks or plans changed unannounced: read them again");
        state.apply(store);
    }
    if now.resets != seen.resets {
        tracing::debug!("a reset failed somewhere: forgetting everything");
        store.inner.announcer.forget(&Forget::Everything);
    }
    *seen = now;
    Ok(())
}
