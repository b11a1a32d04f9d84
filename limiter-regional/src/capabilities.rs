//! What the regional store does: its rate checks, its capabilities and
//! the calls of them at a time a test gives. With `store.rs` (how it is
//! made), the whole of its interface; the work is in the modules each call
//! goes through: `store.rs` for a check, `counts.rs` for peeks, resets and
//! refunds, `control.rs` for blocks and penalties, `relay.rs` for what
//! goes to the other regions in the background.

use std::sync::atomic::Ordering;
use std::time::Duration;

use limiter_core::{
    BlockOrigin, Capabilities, Change, ControlTables, Decision, Error, Forgetter, Key, KeyState,
    Penalty, Policy, Receipt, SharedControl, Store, async_trait,
};

use super::counts::KnownCounts;
use super::store::{self, RegionalStore};
use super::{control, counts, relay};

/// Across a network.
impl Capabilities for RegionalStore {
    /// A check's bound: one call to this region's Redis, within
    /// [`RegionalConfig::local_deadline`](crate::RegionalConfig::local_deadline).
    /// A call that also reaches other regions (an operator's block, a
    /// reset) keeps their [`peer_deadline`](crate::RegionalConfig::peer_deadline)
    /// per call besides: a guard does not cut it short.
    fn deadline(&self) -> Option<Duration> {
        Some(self.config().local_deadline)
    }

    fn as_key_state(&self) -> Option<&dyn KeyState> {
        Some(self)
    }

    fn as_shared_control(&self) -> Option<&dyn SharedControl> {
        Some(self)
    }
}

/// Blocks are kept in each region's Redis by the Redis store, as one
/// region's blocks are: this region's list is the one read, without a
/// call, by every request. Plan assignments and overrides are not kept
/// across regions: a change of them is refused ([`Error::Unsupported`]).
///
/// An operator's block or unblock is made here first (a failure here is
/// answered as is, and no other region is called), then in every other
/// region at once, each through that region's breaker, each call within
/// [`RegionalConfig::peer_deadline`](crate::RegionalConfig::peer_deadline)
/// (the Redis store's: the write, then the notice to that region's
/// instances and their acknowledgements). It is answered `Ok` once every
/// region has confirmed it, so every instance of every region answers it
/// then. When some region did not, the call answers [`Error::Backend`] of
/// kind `region` holding [`RegionsNotConfirmed`](crate::RegionsNotConfirmed), which names them: the
/// regions that confirmed keep the change, and each other region gets it
/// again in the background (the latest change of each key waits for it,
/// up to [`MAX_WAITING`](crate::MAX_WAITING) keys per region, sent every
/// [`REDELIVER_EVERY`](crate::REDELIVER_EVERY) while its breaker lets
/// calls through; a block with the time it has left), so the change ends
/// up in every region within a round and a breaker probe of the region
/// answering again, without being repeated. Repeating the call completes
/// it at once.
///
/// A block a penalty earned ([`BlockOrigin::Penalty`]) is answered once
/// this region has it, and relayed to the others in the background (see
/// below; a region that misses it gets it again, as an operator's): the
/// denial that earned it is not held for a cross-region round trip.
///
/// Denials count in every region: each is counted in this region's Redis
/// (that answer is returned at once) and then relayed to every other
/// region's, in the background. So while the regions are reachable, a
/// denial counts everywhere within a peer round trip (each call within
/// the peer deadline), and a penalty of `n` denials earns its block on
/// the `n`th denial of the identity in all regions together, give or
/// take the denials still on their way. When another region's count earns
/// the block (the `n`th denial reached it as a relay), the relay blocks
/// the identity (the `block_key` of
/// [`penalize`](SharedControl::penalize)) in every region; when this
/// region's answer earns it, the caller blocks it, as for any store.
///
/// A region unreachable misses the denials relayed meanwhile (nothing is
/// sent again), and at most
/// [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT) relays are under
/// way: past that, a denial counts only here.
#[async_trait]
impl SharedControl for RegionalStore {
    async fn change(&self, change: Change<'_>) -> Result<(), Error> {
        self.inner.follow_blocks();
        match change {
            Change::Block {
                key,
                duration,
                origin: BlockOrigin::Operator,
            } => {
                (self.inner)
                    .block_everywhere(key, duration, BlockOrigin::Operator)
                    .await
            }
            Change::Block { key, duration, .. } => {
                self.inner.local.store.change(change).await?;
                let key = key.to_owned();
                relay::relay(self, move |inner| async move {
                    let block = Change::Block {
                        key: &key,
                        duration,
                        origin: BlockOrigin::Penalty,
                    };
                    let blocked = inner.to_peers("block", block);
                    inner.log_missed(blocked.await);
                });
                Ok(())
            }
            Change::Unblock { .. } => {
                self.inner.local.store.change(change).await?;
                self.inner.to_peers("unblock", change).await
            }
            other => Err(Error::Unsupported(other.kind())),
        }
    }

    fn tables(&self) -> &ControlTables {
        self.inner.follow_blocks();
        self.inner.local.store.tables()
    }

    async fn penalize(
        &self,
        key: &str,
        penalty: &Penalty,
        block_key: &str,
    ) -> Result<Option<Duration>, Error> {
        control::count_denial(self, key, penalty, block_key).await
    }

    /// This region's Redis tells its instances of every key reset through
    /// any region (see [`KeyState::reset`]).
    fn on_reset(&self, forget: Forgetter) {
        self.inner.local.store.on_reset(forget);
    }

    /// In this region's Redis: the instances of one region read each
    /// other's reports (a limit's top offenders across them).
    async fn publish_report(
        &self,
        board: &str,
        instance: &str,
        body: &str,
        ttl: Duration,
    ) -> Result<(), Error> {
        (self.inner.local.store)
            .publish_report(board, instance, body, ttl)
            .await
    }

    /// This region's instances' reports.
    async fn reports(&self, board: &str) -> Result<Vec<limiter_core::Report>, Error> {
        self.inner.local.store.reports(board).await
    }
}

impl RegionalStore {
    /// What this region knows of `key`'s counts under `policy` in the
    /// current window, from its own Redis, without a call to another
    /// region: its count and lease, and each other region's count as that
    /// region last told it this window (asks carry the asker's count, gives
    /// the giver's). A peek ([`KeyState::peek`]) answers what a check here would; this
    /// answers the count across regions, as far as this region knows it.
    pub async fn known_counts(&self, key: &str, policy: &Policy) -> Result<KnownCounts, Error> {
        counts::known_counts_when(self, key, policy, self.test_now()).await
    }
}

/// A peek: what a check here would answer now, recording nothing: this
/// region's count against its lease. Other regions' counts do not enter
/// it: they hold their own leases.
///
/// A reset forgets the key's counts in every region (its leases stay): its
/// next check finds the whole quota, in any region, on every instance
/// (each region's instances are told, as instances sharing one Redis are,
/// and forget what they remember of the key: a denial in a deny cache).
/// Made here first (a failure here is answered as is, and no other region
/// is called), then in every other region at once, each call within the
/// peer deadline and through that region's breaker. Answers `Ok` once
/// every region confirmed; when some region did not, [`Error::Backend`] of
/// kind `region` holding [`RegionsNotConfirmed`](crate::RegionsNotConfirmed),
/// which names it: the others hold the reset, and repeating the call
/// completes it.
///
/// Refunds give back in this region what a check here counted, exactly:
/// the request's cost comes off this region's count in the window it was
/// counted in (the current one, or for the sliding window counter the one
/// before), so this region may admit it again; its lease is unchanged, so
/// the quota still holds across regions.
#[async_trait]
impl KeyState for RegionalStore {
    async fn peek(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        counts::peek_when(self, key.as_str(), policy, cost, self.test_now()).await
    }

    async fn reset(&self, key: &Key, policy: &Policy) -> Result<(), Error> {
        counts::reset_everywhere(self, key.as_str(), policy).await
    }

    async fn check_refundable(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<Receipt>), Error> {
        let now = self.test_now();
        counts::check_refundable_when(self, key.as_str(), policy, cost, now).await
    }

    async fn refund(&self, key: &Key, policy: &Policy, receipt: &Receipt) -> Result<(), Error> {
        counts::refund_here(self, key.as_str(), policy, receipt).await
    }
}

impl RegionalStore {
    /// Waits until no relay is under way: every denial and penalty block
    /// relayed so far has reached the other regions (or failed to). For
    /// tests and graceful shutdowns.
    pub async fn relays_idle(&self) {
        let relays = &self.inner.relays;
        loop {
            // Made before the count is read: a relay ending in between
            // still wakes it.
            let ended = relays.idle.notified();
            if relays.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// How many relays are under way now (at most
    /// [`MAX_RELAYS_IN_FLIGHT`](crate::MAX_RELAYS_IN_FLIGHT)).
    pub fn relays_in_flight(&self) -> usize {
        self.inner.relays.in_flight.load(Ordering::Acquire)
    }
}

impl Store for RegionalStore {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        store::run(self, key.as_str(), policy, cost, self.test_now()).await
    }
}
