//! Live overrides in Redis: the hash `OVERRIDES` (limit -> `end_µs
//! text`, by the Redis server's clock) in the notices' slot, bounded by
//! the script that writes it (`override.lua`) and read whole at every
//! subscription (`overrides.lua`, `replica.rs`). A change travels to every instance's
//! table as a notice (`o {id} {µs left} {limit} {text}`; 0 µs ends it),
//! and is counted in the version hash, so one that runs late still
//! reaches every instance (see `announce.rs`).

use limiter_core::{Error, MAX_OVERRIDES};

use super::notice::{OVERRIDES, VERSION, unconfirmed};
use super::subscription;
use super::{RedisStore, scripts};

/// Writes `limit`'s override (`left` µs; 0 ends it) in Redis, counted
/// in the version hash by the same script.
pub(crate) async fn change_override(
    store: &RedisStore,
    limit: &str,
    left: u64,
    text: &str,
) -> Result<(), Error> {
    subscription::subscribe(store);
    let script = scripts::set_override();
    let mut call = script.call_keys(&[OVERRIDES, VERSION]);
    call.arg(limit).arg(left).arg(text).arg(MAX_OVERRIDES);
    let kept = (store.bounded_call(script, &call).await).map_err(unconfirmed)?;
    if kept.first() != Some(&1) {
        return Err(Error::Full(format!(
            "{MAX_OVERRIDES} limits hold an override already: end one before overriding another"
        )));
    }
    Ok(())
}
