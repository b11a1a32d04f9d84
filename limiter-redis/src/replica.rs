//! This instance's copy of the shared state (blocks, plans, overrides),
//! which a request reads without a call: read whole from Redis (at each
//! subscription, and when the version hash says it changed unannounced),
//! and changed by each notice.

use std::collections::HashMap;
use std::time::Duration;

use limiter_core::{BlockOrigin, ControlTables, Error, Override};

use super::notice::{BLOCKS, Notice, OVERRIDES, PENALTY_BLOCKS, PLANS};
use super::{RedisStore, scripts};

/// The blocks (key, time left, origin), plans (key, plan) and overrides
/// (limit, override, time left) that Redis holds.
pub(crate) struct SharedState {
    blocks: Vec<(String, Duration, BlockOrigin)>,
    plans: Vec<(String, String)>,
    overrides: Vec<(String, Override, Duration)>,
}

impl SharedState {
    /// Reads them from `connection`.
    pub(crate) async fn read(
        store: &RedisStore,
        connection: &mut redis::aio::MultiplexedConnection,
    ) -> Result<Self, Error> {
        let blocks = read_blocks(store, connection).await?;
        let plans: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(PLANS)
            .query_async(connection)
            .await
            .map_err(crate::redis_error)?;
        let overrides = read_overrides(connection).await?;
        Ok(Self {
            blocks,
            plans: plans.into_iter().collect(),
            overrides,
        })
    }

    /// Makes them this instance's, replacing what it had.
    pub(crate) fn apply(self, store: &RedisStore) {
        let tables = &store.inner.tables;
        let now = tables.now();
        tables.blocks().replace(self.blocks, now);
        tables.plans().replace(self.plans);
        tables.overrides().replace(self.overrides, now);
    }
}

/// Applies `notice` to this instance's copy (a reset is not the copy's:
/// `subscription.rs` has it forgotten).
pub(crate) fn apply(store: &RedisStore, notice: &Notice<'_>) {
    let tables = &store.inner.tables;
    match *notice {
        Notice::Block {
            left, origin, key, ..
        } => {
            let blocked = (tables.blocks()).block(key, left, origin, tables.now());
            if let Err(error) = blocked {
                tracing::warn!(%error, "a block could not be kept here");
            }
        }
        Notice::Unblock { key, .. } => tables.blocks().unblock(key),
        Notice::Plan { plan, key, .. } => {
            if let Err(error) = tables.plans().assign(key, plan) {
                tracing::warn!(%error, "a plan could not be kept here");
            }
        }
        Notice::Override { change, .. } => apply_override(tables, change),
        Notice::Reset { .. } | Notice::Ack { .. } => {}
    }
}

/// Applies an override notice's `{µs left} {limit} {text}` (`0 {limit}`:
/// ended) to the overrides of `tables`.
fn apply_override(tables: &ControlTables, change: &str) {
    let table = tables.overrides();
    let mut parts = change.splitn(3, ' ');
    let (Some(left), Some(limit)) = (parts.next(), parts.next()) else {
        return;
    };
    let Ok(left) = left.parse::<u64>() else {
        return;
    };
    if left == 0 {
        table.clear(limit);
        return;
    }
    let kept = Override::from_text(parts.next().unwrap_or_default())
        .and_then(|value| table.set(limit, value, Duration::from_micros(left), tables.now()));
    if let Err(error) = kept {
        tracing::warn!(%error, limit, "an override could not be kept here");
    }
}

/// The live blocks (key, time left, origin) of the node `connection`
/// reaches, at most the store's penalty bound of penalty blocks (the
/// ended ones and those past the bound deleted there).
async fn read_blocks(
    store: &RedisStore,
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<Vec<(String, Duration, BlockOrigin)>, Error> {
    let load = scripts::blocks();
    let flat: Vec<String> = redis::Script::new(load.source())
        .key(BLOCKS)
        .key(PENALTY_BLOCKS)
        .arg(store.inner.tables.blocks().max_penalty_blocks())
        .invoke_async(connection)
        .await
        .map_err(crate::redis_error)?;
    let blocks: Vec<_> = flat
        .chunks_exact(3)
        .filter_map(|block| {
            let left = block[1].parse::<u64>().ok()?;
            let origin = match block[2].as_str() {
                "o" => BlockOrigin::Operator,
                "p" => BlockOrigin::Penalty,
                _ => return None,
            };
            Some((block[0].clone(), Duration::from_micros(left), origin))
        })
        .collect();
    Ok(blocks)
}

/// The live overrides (limit, override, time left) of the node
/// `connection` reaches; one whose text does not read is left out, and
/// logged.
async fn read_overrides(
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<Vec<(String, Override, Duration)>, Error> {
    let load = scripts::overrides();
    let flat: Vec<String> = redis::Script::new(load.source())
        .key(OVERRIDES)
        .invoke_async(connection)
        .await
        .map_err(crate::redis_error)?;
    let overrides = flat
        .chunks_exact(3)
        .filter_map(|entry| {
            let left = entry[1].parse::<u64>().ok()?;
            match Override::from_text(&entry[2]) {
                Ok(value) => Some((entry[0].clone(), value, Duration::from_micros(left))),
                Err(error) => {
                    tracing::warn!(%error, limit = entry[0], "an override in Redis does not read");
                    None
                }
            }
        })
        .collect();
    Ok(overrides)
}
