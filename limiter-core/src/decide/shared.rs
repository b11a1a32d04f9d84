//! What every limit under one layer shares, and the checks of keys no
//! limit names (the programmatic handle's, and `Control`'s by key).

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{COUNTING, LimitStore, Offenders, Refund, board};
use crate::key::push_identity;
use crate::{
    Acquired, Attempt, ConcurrencyLimit, ControlTables, Decision, Error, Identity, Key,
    OnStoreError, Policy, Refused, Rule, Waiters, required,
};

/// What every limit under one layer shares: the store, its control tables,
/// the layer's failure policy, the queues of waiting checks and the top
/// offenders.
#[derive(Clone)]
pub struct Shared {
    /// The store, guarded when remote.
    pub store: Arc<dyn LimitStore>,
    /// The store's blocks, plans and overrides, read by every check
    /// without a call; `None` when the store keeps none.
    pub tables: Option<ControlTables>,
    /// The failure policy set on the layer, for limits that set none.
    pub on_store_error: Option<OnStoreError>,
    /// The key prefix followed by `:`, as every key starts.
    pub key_start: Box<str>,
    /// The queues of checks waiting for their retry time.
    pub waiters: Waiters,
    /// The identities each limit denied most, on this instance.
    pub offenders: Arc<Offenders>,
}

impl Shared {
    /// How long the block of `block_key` (`{prefix}:{identity}`) has left;
    /// `None` when it is not blocked.
    pub fn blocked(&self, block_key: &str) -> Option<Duration> {
        self.tables.as_ref()?.blocked(block_key)
    }

    /// The block of the identity a key no limit names starts with: the key
    /// up to its first `:` after the prefix (an identity escapes its own),
    /// as [`Identity::push_key`] and `:{action}` build it.
    pub fn block_of_key(&self, key: &Key) -> Option<Duration> {
        let tables = self.tables.as_ref()?;
        // An empty list costs one atomic load.
        if tables.blocks().is_empty() {
            return None;
        }
        tables.blocked(crate::identity_key_of(key.as_str(), self.key_start.len())?)
    }

    /// A check of `key` (under the prefix) that no limit names, recorded
    /// if allowed: the block of the identity it starts with, then the
    /// store under its guard's failure policy (at once when the store
    /// decides at once).
    pub async fn check_key(&self, key: Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        if let Some(left) = self.block_of_key(&key) {
            return Ok(Decision::blocked(policy, left));
        }
        if let Some(decided) = self.store.check_now(&key, policy, cost) {
            return decided;
        }
        let policy = Arc::new(policy.clone());
        let (verdict, _) = Arc::clone(&self.store)
            .check_owned(key, Arc::clone(&policy), cost, None)
            .await;
        verdict?.into_decision(&policy)
    }

    /// The key prefix, as [`key_start`](Self::key_start) holds it without
    /// its `:`.
    pub fn prefix(&self) -> &str {
        self.key_start.strip_suffix(':').unwrap_or(&self.key_start)
    }

    /// `{prefix}:{key}`: the key of a call that names no limit, `key`
    /// used as given.
    pub fn key(&self, key: &str) -> Key {
        let mut full = String::with_capacity(self.key_start.len() + key.len());
        full.push_str(&self.key_start);
        full.push_str(key);
        Key::from(full)
    }

    /// Whether `user` may perform `action` again, at most `max_count` times
    /// in any `period` (a sliding log) on `{prefix}:user={user}:{action}`,
    /// both escaped; [`check_key`](Self::check_key)'s steps.
    pub async fn is_action_allowed(
        &self,
        user: &str,
        action: &str,
        period: Duration,
        max_count: u64,
    ) -> Result<bool, Error> {
        let policy = Policy::sliding_log([Rule::new(max_count, period)?])?;
        let mut key = String::from(&*self.key_start);
        Identity::push_user_key(&mut key, user.as_bytes());
        key.push(':');
        push_identity(&mut key, action);
        let decision = self.check_key(Key::from(key), &policy, 1).await?;
        Ok(decision.allowed())
    }

    /// [`check_key`](Self::check_key), waiting in turn with the key's
    /// other waiters instead of being denied while the retry time is at
    /// most `max_wait` away.
    pub async fn acquire_key(
        &self,
        key: Key,
        policy: &Policy,
        max_wait: Duration,
    ) -> Result<Decision, Error> {
        let cost = policy.cost();
        (self.waiters)
            .acquire(key.as_str(), max_wait, || {
                self.check_key(key.clone(), policy, cost)
            })
            .await
    }

    /// What [`check_key`](Self::check_key) would answer now, recording
    /// nothing. Fails with [`Error::Unsupported`] for a store that cannot.
    pub async fn peek_key(&self, key: &Key, policy: &Policy) -> Result<Decision, Error> {
        let peek = required(
            self.store.capabilities().as_key_state(),
            "reading a key without counting",
        )?;
        peek.peek(key, policy, policy.cost()).await
    }

    /// Forgets `key`'s state under `policy`, on every instance sharing the
    /// store. Fails with [`Error::Unsupported`] for a store that cannot.
    pub async fn reset_key(&self, key: &Key, policy: &Policy) -> Result<(), Error> {
        let reset = required(self.store.capabilities().as_key_state(), "resetting a key")?;
        reset.reset(key, policy).await
    }

    /// Takes a permit of `limit` on `key`, given back when dropped. Fails
    /// with [`Error::Unsupported`] for a store that keeps no permits.
    pub async fn permit_key(&self, key: Key, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        let store = Arc::clone(&self.store);
        store
            .acquire_permit_owned(key.into_string(), *limit, None)
            .await
    }

    /// A check of `key` that no limit names, counting only if its outcome
    /// says so ([`check_key`](Self::check_key)'s steps): recorded now, and
    /// given back by [`Attempt::refund`].
    pub async fn attempt_key(&self, key: Key, policy: &Policy) -> Result<Attempt, Error> {
        let policy = Arc::new(policy.clone());
        if let Some(left) = self.block_of_key(&key) {
            return Ok(Attempt::refused(Refused::Blocked(left), policy));
        }
        let (decision, receipt) = required(self.store.capabilities().as_key_state(), COUNTING)?
            .check_refundable(&key, &policy, policy.cost())
            .await?;
        let attempt = Attempt::new(decision, Arc::clone(&policy));
        Ok(match receipt {
            Some(receipt) => attempt.giving_back(Box::new(Refund {
                store: Arc::clone(&self.store),
                key,
                policy,
                receipt,
            })),
            None => attempt,
        })
    }

    /// The key of the block of `key`'s identity: `{prefix}:{identity}`.
    pub fn block_key(&self, key: &Key) -> String {
        let mut block_key = String::from(&*self.key_start);
        block_key.push_str(key.identity_part().unwrap_or_default());
        block_key
    }

    /// Counts a denial of `identity` by the limit `limit` among its top
    /// offenders, and starts publishing them (once, when a runtime runs).
    pub fn record_denial(&self, limit: &str, identity: &Identity) {
        self.offenders.record(limit, identity);
        if self.offenders.starts_publishing() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(publish_offenders(
                    Arc::downgrade(&self.offenders),
                    Arc::clone(&self.store),
                    self.key_start.clone(),
                ))),
                Err(_) => self.offenders.stopped_publishing(),
            }
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("key_start", &self.key_start)
            .field("on_store_error", &self.on_store_error)
            .field("waiters", &self.waiters)
            .finish_non_exhaustive()
    }
}

/// Publishes each limit's counts through `store` every period, until the
/// layer is gone or the store keeps no reports; a failed publication is
/// logged and tried again the next period.
async fn publish_offenders(
    offenders: Weak<Offenders>,
    store: Arc<dyn LimitStore>,
    key_start: Box<str>,
) {
    let Some(every) = offenders.upgrade().map(|o| o.every()) else {
        return;
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(live) = offenders.upgrade() else {
            return;
        };
        let (instance, ttl, reports) = (live.instance(), live.ttl(), live.reports());
        drop(live);
        let Some(shared) = store.capabilities().as_shared_control() else {
            return;
        };
        // A limit that denied nobody for two sketch periods has nothing to
        // say; what it published last is read no longer than its time.
        for (limit, report) in reports.into_iter().filter(|(_, r)| r.counted > 0) {
            let board = board(&key_start, &limit);
            match (shared.publish_report(&board, &instance, &report.to_text(), ttl)).await {
                Ok(()) => {}
                Err(Error::Unsupported(_)) => return,
                Err(error) => {
                    tracing::debug!(%error, limit = &*limit, "top offenders not published")
                }
            }
        }
    }
}
