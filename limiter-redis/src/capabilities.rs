//! What the Redis store does: its rate checks, its capabilities, each kept
//! in Redis, and the calls of them at a time a test gives. With `store.rs`
//! (how it is made and reaches Redis), the whole of its interface; the
//! modules each call goes through hold the work.

use std::sync::atomic::Ordering;
use std::time::Duration;

use limiter_core::{
    Acquired, Capabilities, Change, ConcurrencyLimit, ControlTables, Decision, Error, Forgetter,
    Key, KeyState, Leases, MAX_REPORTERS, Override, Permits, Policy, Receipt, Report,
    SharedControl, Store, async_trait, validate_limit_name, validate_override_duration,
    validate_report,
};

use super::announce::{self, ResetInFlight};
use super::link::lock;
use super::notice::unconfirmed;
use super::store::Backend;
use super::{
    RedisStore, blocks, coalesce, lease, overrides, permits, refund, scripts, subscription,
};

/// Across a network, each call bounded by its response timeout, a
/// Cluster's nodes failing one by one; every capability kept in Redis.
impl Capabilities for RedisStore {
    /// Every call, connecting included, within
    /// [`RedisConfig::response_timeout`](crate::RedisConfig::response_timeout).
    fn deadline(&self) -> Option<Duration> {
        Some(self.inner.config.response_timeout)
    }

    /// On a Redis Cluster, the node serving `key`'s slot (as last read from
    /// `CLUSTER SLOTS`); 0 for a standalone Redis, which fails as a whole.
    fn failure_domain(&self, key: &Key) -> u64 {
        match &self.inner.backend {
            Backend::Cluster(cluster) => cluster.slots.domain(key.as_str()),
            Backend::Primary(_) => 0,
        }
    }

    /// The node's `host:port`.
    fn failure_domain_name(&self, domain: u64) -> String {
        match &self.inner.backend {
            Backend::Cluster(cluster) => cluster.slots.name(domain),
            Backend::Primary(_) => None,
        }
        .unwrap_or_else(|| domain.to_string())
    }

    fn as_key_state(&self) -> Option<&dyn KeyState> {
        Some(self)
    }

    fn as_permits(&self) -> Option<&dyn Permits> {
        Some(self)
    }

    fn as_leases(&self) -> Option<&dyn Leases> {
        Some(self)
    }

    fn as_shared_control(&self) -> Option<&dyn SharedControl> {
        Some(self)
    }
}

/// A peek: the algorithm's own script with its writes shadowed
/// (`peek.lua`), on the Redis server's clock. A reset: `DEL` of the key
/// (each algorithm keeps a key's state in that one key, a leased sliding
/// log's entries included), then announced to every instance, which
/// forgets what it remembers of the key (see [`SharedControl::on_reset`]);
/// answered once they have acknowledged, or after the response timeout.
///
/// A reset is answered [`Error::Unconfirmed`] when the call may have run
/// (no answer within the deadline, a connection failed after it was
/// written): the change is then in effect on every instance or on none
/// within 2 s of Redis answering again (`reconcile.rs`); repeat the call,
/// it is idempotent.
#[async_trait]
impl KeyState for RedisStore {
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        (self.peek_at_time(key.as_str(), policy, cost, self.test_now())).await
    }

    async fn reset(&self, key: &Key, _policy: &Policy) -> Result<(), Error> {
        announce::reset_and_announce(self, key.as_str()).await
    }

    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        let now = self.test_now();
        refund::check_refundable_at_time(self, key.as_str(), policy, cost, now).await
    }

    async fn refund(&self, key: &Key, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        policy.counts_by_outcome()?;
        let call = refund::refund_call(key.as_str(), policy, receipt);
        self.bounded_call(scripts::refund(), &call).await?;
        Ok(())
    }
}

/// Kept in Redis and in each instance's tables, which every request
/// reads without a call: operator blocks in a hash, penalty blocks in a
/// sorted set by end time, each kind within its bound (see
/// [`RedisConfig::max_penalty_blocks`](crate::RedisConfig::max_penalty_blocks)),
/// plan assignments and overrides in hashes. A change is answered once
/// every subscribed instance has applied it (see `announce.rs`).
///
/// A change is answered [`Error::Unconfirmed`] when the call may have run
/// (no answer within the deadline, a connection failed after it was
/// written): the change is then in effect on every instance or on none
/// within 2 s of Redis answering again (`reconcile.rs`); repeat the call,
/// it is idempotent. A penalty is one call of `penalty.lua` on the key,
/// by the Redis server's clock.
#[async_trait]
impl SharedControl for RedisStore {
    async fn change(&self, change: Change<'_>) -> Result<(), Error> {
        match change {
            Change::Block {
                key,
                duration,
                origin,
            } => blocks::block_and_announce(self, key, duration, origin).await,
            Change::Unblock { key } => blocks::unblock_and_announce(self, key).await,
            Change::AssignPlan { key, plan } => {
                announce::assign_and_announce(self, key, plan).await
            }
            Change::SetOverride {
                limit,
                value,
                duration,
            } => set_override(self, limit, value, duration).await,
            Change::ClearOverride { limit } => {
                validate_limit_name(limit)?;
                overrides::change_override(self, limit, 0, "").await?;
                self.inner.tables.overrides().clear(limit);
                (announce::announce(self, "o", &format!("0 {limit}")).await).map_err(unconfirmed)
            }
            other => Err(Error::Unsupported(other.kind())),
        }
    }

    /// Starts the subscription that fills the tables, when a runtime runs
    /// (a layer asks for them when it is made): see
    /// [`synced`](RedisStore::synced) for waiting until they are read.
    fn tables(&self) -> &ControlTables {
        subscription::subscribe(self);
        &self.inner.tables
    }

    async fn penalize(
        &self,
        key: &str,
        penalty: &limiter_core::Penalty,
        _block_key: &str,
    ) -> Result<Option<Duration>, Error> {
        self.penalize_at_time(key, penalty, self.test_now()).await
    }

    fn on_reset(&self, forget: Forgetter) {
        lock(&self.inner.announcer.forgetters).push(forget);
        subscription::subscribe(self);
    }

    /// A field of the board's hash, by the Redis server's clock
    /// (`report.lua`); the hash expires once its reports have.
    async fn publish_report(
        &self,
        board: &str,
        instance: &str,
        body: &str,
        ttl: Duration,
    ) -> Result<(), Error> {
        validate_report(board, instance, body)?;
        let script = scripts::report();
        let mut call = script.call(&reports_key(board));
        let ttl = u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX);
        call.arg(self.test_now().map_or(String::new(), |now| now.to_string()))
            .arg("")
            .arg(instance)
            .arg(ttl)
            .arg(body)
            .arg(MAX_REPORTERS);
        let kept: Vec<i64> = self.bounded_call(script, &call).await?;
        if kept.first() != Some(&1) {
            return Err(Error::Full(format!(
                "{MAX_REPORTERS} instances report on {board:?} already"
            )));
        }
        Ok(())
    }

    async fn reports(&self, board: &str) -> Result<Vec<Report>, Error> {
        let script = scripts::reports();
        let mut call = script.call(&reports_key(board));
        call.arg(self.test_now().map_or(String::new(), |now| now.to_string()))
            .arg("");
        let flat: Vec<String> = self
            .bounded_call_until(script, &call, self.deadline())
            .await?;
        Ok(flat
            .chunks_exact(3)
            .filter_map(|report| {
                Some(Report {
                    instance: report[0].clone(),
                    age: Duration::from_micros(report[1].parse().ok()?),
                    body: report[2].clone(),
                })
            })
            .collect())
    }
}

/// The hash of a board's reports, in the control state's slot: on a
/// Cluster, the node whose breaker guards them (see [`CONTROL_STATE_KEY`](limiter_core::CONTROL_STATE_KEY)).
fn reports_key(board: &str) -> String {
    format!("{{limiter:resets}}:reports:{board}")
}

/// Writes `limit`'s override in Redis and here, then tells every instance.
async fn set_override(
    store: &RedisStore,
    limit: &str,
    value: &Override,
    duration: Duration,
) -> Result<(), Error> {
    validate_override_duration(duration)?;
    validate_limit_name(limit)?;
    let left = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
    let text = value.to_text();
    overrides::change_override(store, limit, left, &text).await?;
    let tables = &store.inner.tables;
    (tables.overrides()).set(limit, value.clone(), duration, tables.now())?;
    let notice = format!("{left} {limit} {text}");
    (announce::announce(store, "o", &notice).await).map_err(unconfirmed)
}

#[async_trait]
impl Permits for RedisStore {
    /// A lease in a sorted set of the key (`concurrency.lua`), renewed by a
    /// task every third of the lease while the permit is held, given back
    /// in a task when it is dropped. A call cancelled or failed before its
    /// answer gives back the permit it may have taken.
    async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        permits::acquire_permit_at_time(self, key, limit, self.test_now()).await
    }
}

#[async_trait]
impl Leases for RedisStore {
    /// One call of `lease.lua`, on the state of the sliding log or the
    /// fixed window script: the leased entries of a sliding log are
    /// scored at the lease's end.
    async fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &limiter_core::hot::LeaseRequest,
    ) -> Result<limiter_core::hot::LeaseGrant, Error> {
        lease::take_lease(self, key, policy, request).await
    }

    async fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &limiter_core::hot::LeaseGrant,
        unused: u64,
    ) -> Result<u64, Error> {
        lease::give_back(self, key, policy, grant, unused).await
    }
}

impl Store for RedisStore {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        coalesce::run(self, key.as_str(), policy, cost, self.test_now()).await
    }
}

/// Its own calls: a reset told to every instance without touching the
/// key, the wait for the shared state, and a batch for tests.
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

    /// Decides the requests of `costs` (one each, in this order) in one
    /// call of the batch script, as coalesced checks are: for tests that
    /// compare a batch with as many checks one after another.
    #[cfg(feature = "test-util")]
    pub async fn check_batch(
        &self,
        key: &str,
        policy: &Policy,
        costs: &[u64],
    ) -> Result<Vec<Decision>, Error> {
        for &cost in costs {
            policy.validate_cost(cost)?;
        }
        let (now, deadline) = (self.test_now(), self.deadline());
        super::check::decide_batch(self, key, policy, costs, now, deadline).await
    }

    /// Checks a request of `cost` on each of `keys` in one call of the
    /// script of several keys, as checks of other keys meeting a call in
    /// flight are: for tests that compare it with as many checks one after
    /// another.
    #[cfg(feature = "test-util")]
    pub async fn check_keys(
        &self,
        keys: &[&str],
        policy: &Policy,
        cost: u64,
    ) -> Result<Vec<Decision>, Error> {
        policy.validate_cost(cost)?;
        let (now, deadline) = (self.test_now(), self.deadline());
        // The node of the first key: on a Cluster, the others it does not
        // serve are checked on their own.
        let node = (keys.first()).and_then(|key| super::node_batch::node_of(self, key));
        let node = node.unwrap_or(0);
        let decided = super::check::decide_keys(self, node, keys, policy, cost, now, deadline);
        decided.await?.into_iter().collect()
    }

    /// Tells every instance using this Redis that `key` was reset, without
    /// touching the key: for a store built on this crate whose state of the
    /// key this store does not hold (the regional store resets its own
    /// hash, then tells each region's instances, so that what they remember
    /// of the key, a denial in a deny cache, goes too). Answered once every
    /// subscribed instance has forgotten it; [`Error::Unconfirmed`] as for a
    /// reset.
    pub async fn announce_reset(&self, key: &str) -> Result<(), Error> {
        subscription::subscribe(self);
        let in_flight = ResetInFlight::new(self);
        announce::announce(self, "r", key)
            .await
            .map_err(unconfirmed)?;
        in_flight.confirm();
        Ok(())
    }

    /// Waits, at most `within`, until this store's subscription has read
    /// the blocks, plans and live overrides that Redis holds, so that a
    /// starting instance decides its first requests by them; answers
    /// whether it has. An application calls it once when it starts (the UGC
    /// server does); an instance that does not know them yet (Redis is
    /// down) answers by the compiled limits until its subscription reads
    /// them.
    pub async fn synced(&self, within: Duration) -> bool {
        subscription::subscribe(self);
        let announcer = &self.inner.announcer;
        let read = async {
            loop {
                let notified = announcer.synced_notify.notified();
                if announcer.synced.load(Ordering::Acquire) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(within, read).await.is_ok()
    }
}
