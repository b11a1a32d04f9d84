//! Live overrides in Redis: the hash `OVERRIDES` (limit -> `end_µs
//! text`, by the Redis server's clock) in the notices' slot, bounded by
//! the script that writes it (`override.lua`) and read whole at every
//! subscription (`overrides.lua`, `replica.rs`). A change travels to every instance's
//! table as a notice (`o {id} {µs left} {limit} {text}`; 0 µs ends it),
//! and is counted in the version hash, so one that runs late still
//! reaches every instance (see `announce.rs`).

use std::sync::Arc;
use std::time::Duration;

use limiter_core::{
    ActiveOverride, Clock, Error, MAX_OVERRIDES, Override, OverrideTable, Overrides, SystemClock,
    async_trait, validate_limit_name, validate_override_duration,
};

use super::notice::{OVERRIDES, VERSION, unconfirmed};
use super::{RedisStore, scripts};

#[async_trait]
impl Overrides for RedisStore {
    async fn set_override(
        &self,
        limit: &str,
        value: &Override,
        duration: Duration,
    ) -> Result<(), Error> {
        validate_override_duration(duration)?;
        validate_limit_name(limit)?;
        let left = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        let text = value.to_text();
        self.change_override(limit, left, &text).await?;
        let now = SystemClock.now_micros();
        self.inner
            .overrides
            .set(limit, value.clone(), duration, now)?;
        let notice = format!("{left} {limit} {text}");
        (self.announce("o", &notice).await).map_err(unconfirmed)
    }

    async fn clear_override(&self, limit: &str) -> Result<(), Error> {
        validate_limit_name(limit)?;
        self.change_override(limit, 0, "").await?;
        self.inner.overrides.clear(limit);
        (self.announce("o", &format!("0 {limit}")).await).map_err(unconfirmed)
    }

    fn override_of(&self, limit: &str) -> Option<(Arc<Override>, Duration)> {
        self.inner.overrides.get(limit, SystemClock.now_micros())
    }

    fn overrides(&self) -> Vec<ActiveOverride> {
        self.inner.overrides.list(SystemClock.now_micros())
    }

    /// Starts the subscription that fills the table, when a runtime runs
    /// (a layer asks for the table when it is made): see
    /// [`synced`](RedisStore::synced) for waiting until it is read.
    fn override_table(&self) -> Option<Arc<OverrideTable>> {
        self.subscribe();
        Some(Arc::clone(&self.inner.overrides))
    }
}

impl RedisStore {
    /// Writes `limit`'s override (`left` µs; 0 ends it) in Redis, counted
    /// in the version hash by the same script.
    async fn change_override(&self, limit: &str, left: u64, text: &str) -> Result<(), Error> {
        self.subscribe();
        let script = scripts::set_override();
        let mut call = script.call_keys(&[OVERRIDES, VERSION]);
        call.arg(limit).arg(left).arg(text).arg(MAX_OVERRIDES);
        let kept = (self.bounded_call(script, &call).await).map_err(unconfirmed)?;
        if kept.first() != Some(&1) {
            return Err(Error::Full(format!(
                "{MAX_OVERRIDES} limits hold an override already: end one before overriding another"
            )));
        }
        Ok(())
    }
}
