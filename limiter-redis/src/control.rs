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
        let lua = scripts::peek(policy.algorithm());
        let call = scripts::evalsha_of(lua, key, policy, cost, now);
        let reply = self.bounded_call(lua, &call).await?;
        scripts::parse_reply(&reply, policy, cost)
    }
}
