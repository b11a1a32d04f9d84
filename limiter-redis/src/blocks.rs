//! Blocks in Redis: an operator's in the hash `BLOCKS`, penalties' in the
//! sorted set `PENALTY_BLOCKS` (by end time), both in the channel's slot,
//! each kind bounded by the script that writes it (`block.lua`) and when an
//! instance reads them at its subscription (`blocks.lua`, `replica.rs`). A
//! block or an unblock travels to every instance's list as a notice (see
//! `announce.rs`): `b` an operator's, `e` a penalty's.

use std::time::Duration;

use limiter_core::{BlockOrigin, Error};

use super::announce;
use super::notice::{BLOCKS, PENALTY_BLOCKS, VERSION, unconfirmed};
use super::subscription;
use super::{RedisStore, scripts};

/// The longest block kept (µs, about 142 years): an end time stays an exact
/// integer in Lua and in a sorted set's score (a double).
const MAX_BLOCK_US: u64 = 1 << 52;

/// Blocks `key` for `duration` in Redis (by the Redis server's clock,
/// within the bound of `origin`), here, then on every instance. An
/// operator's block is counted in [`VERSION`] by the same script, so
/// one that runs late still reaches every instance; a penalty's is not
/// (a flood of them would have every instance read every block each
/// poll).
pub(crate) async fn block_and_announce(
    store: &RedisStore,
    key: &str,
    duration: Duration,
    origin: BlockOrigin,
) -> Result<(), Error> {
    subscription::subscribe(store);
    let left = u64::try_from(duration.as_micros())
        .unwrap_or(u64::MAX)
        .min(MAX_BLOCK_US);
    let (mark, bound, notice) = match origin {
        BlockOrigin::Operator => ("o", limiter_core::MAX_BLOCKS, "b"),
        BlockOrigin::Penalty => ("p", store.inner.tables.blocks().max_penalty_blocks(), "e"),
    };
    let block = scripts::block();
    let mut call = match origin {
        BlockOrigin::Operator => block.call_keys(&[BLOCKS, PENALTY_BLOCKS, VERSION]),
        BlockOrigin::Penalty => block.call_keys(&[BLOCKS, PENALTY_BLOCKS]),
    };
    call.arg(key).arg(left).arg(mark).arg(bound);
    let kept = (store.bounded_call(block, &call).await).map_err(unconfirmed)?;
    if kept.first() != Some(&1) {
        return Err(Error::Full(format!(
            "{} operator blocks are held already: lift one before blocking another key",
            limiter_core::MAX_BLOCKS
        )));
    }
    let duration = Duration::from_micros(left);
    let tables = &store.inner.tables;
    (tables.blocks()).block(key, duration, origin, tables.now())?;
    (announce::announce(store, notice, &format!("{left} {key}")).await).map_err(unconfirmed)
}

/// Lifts `key`'s blocks in Redis, here, then on every instance; counted
/// in [`VERSION`] by the same script.
pub(crate) async fn unblock_and_announce(store: &RedisStore, key: &str) -> Result<(), Error> {
    subscription::subscribe(store);
    let unblock = scripts::unblock();
    let mut call = unblock.call_keys(&[BLOCKS, PENALTY_BLOCKS, VERSION]);
    call.arg(key);
    (store.bounded_call(unblock, &call).await).map_err(unconfirmed)?;
    store.inner.tables.blocks().unblock(key);
    announce::announce(store, "u", key)
        .await
        .map_err(unconfirmed)
}
