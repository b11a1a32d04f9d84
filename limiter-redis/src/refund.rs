//! Counting by outcome on Redis: a check that answers the server's time it
//! recorded at (the algorithm's own `decide`, its reply with the time
//! appended: `scripts/receipted.lua`, so it cannot drift from the check), and
//! the refund (`scripts/refund.lua`), one call each, never coalesced.

use limiter_core::{Decision, Error, Policy, Receipt};
use redis::Cmd;

use super::RedisStore;
use super::check;
use super::scripts;
use super::subscription;

/// The algorithm's own check, replying with the server's time too; the
/// refund gives back the entries recorded at that time (the sliding log)
/// or the cost counted in that window (the window counters), in one script.
/// A check at `now` (the server's time when `None`) that answers when
/// it recorded the request.
pub(crate) async fn check_refundable_at_time(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<(Decision, Option<Receipt>), Error> {
    policy.counts_by_outcome()?;
    policy.validate_cost(cost)?;
    subscription::subscribe(store);
    let Some(lua) = scripts::sources::receipted(policy.algorithm()) else {
        unreachable!("refused by counts_by_outcome")
    };
    let call = scripts::evalsha_of(lua, key, policy, cost, now);
    let reply = check::script(store, lua, &call, 1).await?;
    let Some((&at, reply)) = reply.split_last() else {
        return Err(Error::Protocol("an empty script reply".into()));
    };
    let decision = scripts::parse_reply(reply, policy, cost)?;
    let at = u64::try_from(at).map_err(|_| Error::Protocol(format!("time {at}")))?;
    let receipt = decision.allowed().then(|| Receipt::new(at, cost));
    Ok((decision, receipt))
}

/// `refund.lua` of `receipt` on `key`.
pub(crate) fn refund_call(key: &str, policy: &Policy, receipt: &Receipt) -> Cmd {
    let mut call = scripts::refund().call(key);
    call.arg(receipt.at_us())
        .arg(receipt.cost())
        .arg(policy.algorithm().name())
        .arg(policy.rules()[0].window_us());
    call
}
