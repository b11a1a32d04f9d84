//! Reading a key ahead of its next check, and forgetting it.

use limiter_core::{Decision, Error, Policy};

use super::{RedisStore, scripts};

impl RedisStore {
    /// What a check would answer at `now` (the Redis server's time when
    /// `None`): the algorithm's own script with its writes shadowed
    /// (`peek.lua`), never coalesced.
    pub(super) async fn peek_at_time(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let lua = scripts::sources::peek(policy.algorithm());
        let call = scripts::evalsha_of(lua, key, policy, cost, now);
        let reply = self.bounded_call(lua, &call).await?;
        scripts::parse_reply(&reply, policy, cost)
    }

    /// Records a denial of `key` by `penalty` at `now` (the server's time
    /// when `None`); the block it earns, if any.
    pub(super) async fn penalize_at_time(
        &self,
        key: &str,
        penalty: &limiter_core::Penalty,
        now: Option<u64>,
    ) -> Result<Option<std::time::Duration>, Error> {
        let lua = scripts::penalty();
        let mut call = lua.call(key);
        match now {
            Some(now) => call.arg(now),
            None => call.arg(""),
        };
        call.arg(penalty.after()).arg(penalty.within_us());
        for &block in penalty.blocks_us() {
            call.arg(block);
        }
        let reply = self.bounded_call(lua, &call).await?;
        Ok(match reply.first() {
            Some(&block) if block > 0 => Some(std::time::Duration::from_micros(block as u64)),
            _ => None,
        })
    }
}
