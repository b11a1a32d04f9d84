//! Leases on Redis (`scripts/lease.lua`): one call takes a batch of a key's
//! permits, another gives back what was not used.

use redis::Cmd;

use super::RedisStore;
use super::scripts;
use limiter_core::backend::sliding_log;
use limiter_core::hot::{LeaseGrant, LeaseRequest};
use limiter_core::{ConfigError, Error};
use limiter_core::{Decision, MAX_RULES, RuleStatus};
use limiter_core::{Policy, backend::Kind};

/// `EVALSHA {sha} 1 {key} {now} {need}`; `now` is empty unless a test gives it.
fn start(key: &str, at: Option<u64>, need: u64) -> Cmd {
    let mut cmd = scripts::lease().call(key);
    match at {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    cmd.arg(need);
    cmd
}

fn not_leasable(policy: &Policy) -> Error {
    Error::Config(ConfigError::InvalidHotKey {
        mode: "lease",
        reason: format!(
            "leases work with sliding_log and fixed_window, not {}",
            policy.algorithm()
        ),
    })
}

fn malformed(reply: &[i64]) -> Error {
    Error::Protocol(format!("lease script reply {reply:?}"))
}

fn parse_grant(
    reply: &[i64],
    policy: &Policy,
    request: &LeaseRequest,
) -> Result<LeaseGrant, Error> {
    let rules = policy.rules();
    let number = |value: i64| u64::try_from(value).map_err(|_| malformed(reply));
    let [granted, retry, ..] = *reply else {
        return Err(malformed(reply));
    };
    let granted = number(granted)?;
    if (granted == 0) != (retry >= 0) || granted > request.want() {
        return Err(malformed(reply));
    }
    let denied_wait = u64::try_from(retry).ok();
    let (decision, length_us, ticket) = match policy.kind() {
        Kind::SlidingLog => {
            let n = rules.len();
            let [_, _, decided_by, end, ref per_rule @ ..] = *reply else {
                return Err(malformed(reply));
            };
            if per_rule.len() != 2 * n || !(0..n as i64).contains(&decided_by) {
                return Err(malformed(reply));
            }
            let (mut counted, mut available) = ([0u64; MAX_RULES], [0u64; MAX_RULES]);
            for (to, &value) in counted[..n]
                .iter_mut()
                .chain(&mut available[..n])
                .zip(per_rule)
            {
                *to = number(value)?;
            }
            let denied = denied_wait.map(|wait| (wait, decided_by as usize));
            let decision = sliding_log::decide(
                rules,
                &counted[..n],
                &available[..n],
                denied,
                Some(request.length_us() as i64),
                granted.max(1),
            );
            (decision, request.length_us(), number(end)?)
        }
        Kind::FixedWindow => {
            let [_, _, ends_in, count, start] = *reply else {
                return Err(malformed(reply));
            };
            let (ends_in, count) = (number(ends_in)?, number(count)?);
            let rule = rules[0];
            let status = RuleStatus::new(rule.limit().saturating_sub(count + granted), ends_in);
            let decision = Decision::single(rule, status, denied_wait, 0, ends_in);
            (decision, request.length_us().min(ends_in), number(start)?)
        }
        _ => return Err(not_leasable(policy)),
    };
    Ok(LeaseGrant::new(
        granted,
        length_us,
        decision,
        ticket,
        request.id(),
    ))
}

pub(crate) async fn take_lease(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    request: &LeaseRequest,
) -> Result<LeaseGrant, Error> {
    policy.validate_cost(request.need())?;
    let mut cmd = start(key, request.at(), request.need());
    match policy.kind() {
        Kind::SlidingLog => {
            let longest = sliding_log::longest_window_us(policy.rules());
            cmd.arg("L")
                .arg(request.want())
                .arg(request.length_us())
                .arg(request.id())
                .arg(longest)
                .arg(policy.rules().len());
            for rule in policy.rules() {
                cmd.arg(rule.limit()).arg(rule.window_us());
            }
        }
        Kind::FixedWindow => {
            let rule = policy.rules()[0];
            cmd.arg("F")
                .arg(request.want())
                .arg(request.length_us())
                .arg(rule.limit())
                .arg(rule.window_us());
        }
        _ => return Err(not_leasable(policy)),
    }
    let reply = run_lua(store, &cmd).await?;
    parse_grant(&reply, policy, request)
}

pub(crate) async fn give_back(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    grant: &LeaseGrant,
    unused: u64,
) -> Result<u64, Error> {
    let used = grant.granted() - unused;
    let mut cmd = start(key, None, 1);
    match policy.kind() {
        Kind::SlidingLog => {
            cmd.arg("l")
                .arg(grant.ticket())
                .arg(grant.id())
                .arg(used)
                .arg(grant.granted());
        }
        Kind::FixedWindow => {
            cmd.arg("f").arg(grant.ticket()).arg(unused);
        }
        _ => return Err(not_leasable(policy)),
    }
    let reply = run_lua(store, &cmd).await?;
    match reply[..] {
        [returned] => u64::try_from(returned).map_err(|_| malformed(&reply)),
        _ => Err(malformed(&reply)),
    }
}

/// One call of the lease script, within the response timeout (never
/// replayed past it).
pub(crate) async fn run_lua(store: &RedisStore, cmd: &Cmd) -> Result<Vec<i64>, Error> {
    let deadline = store.inner.config.response_timeout;
    tokio::time::timeout(deadline, store.call(scripts::lease(), cmd))
        .await
        .unwrap_or(Err(Error::Timeout(deadline)))
}
