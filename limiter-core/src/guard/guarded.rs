use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::breaker::{Admission, Breaker, BreakerConfig, BreakerState};
use super::deny_cache::{DEFAULT_DENY_CACHE_CAPACITY, DenyCache};
use super::domains::Breakers;
use crate::clock::{Clock, SystemClock};
use crate::concurrency::{Acquired, ConcurrencyLimit, Permit};
use crate::hot::{LeaseGrant, LeaseRequest};
use crate::store::memory::MemoryStore;
use crate::store::{Forget, Store, required};
use crate::{Decision, Error, Key, OnStoreError, Policy, Verdict};

/// How long one store call may take unless configured: tens of
/// milliseconds, not the client's default of half a second.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(50);

/// The settings of a [`Guarded`] store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardConfig {
    /// The deadline of one store call ([`DEFAULT_DEADLINE`]).
    pub deadline: Duration,
    /// When the breaker opens and how often it probes.
    pub breaker: BreakerConfig,
    /// What to decide when the store fails (unless a call says otherwise).
    pub on_store_error: OnStoreError,
    /// How many denials the deny cache keeps; 0 turns it off.
    pub deny_cache_capacity: usize,
    /// How many keys the fallback limiter keeps at most.
    pub fallback_capacity: usize,
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self {
            deadline: DEFAULT_DEADLINE,
            breaker: BreakerConfig::default(),
            on_store_error: OnStoreError::default(),
            deny_cache_capacity: DEFAULT_DENY_CACHE_CAPACITY,
            fallback_capacity: crate::DEFAULT_CAPACITY,
        }
    }
}

/// A store guarded against failure: every call has a deadline; after
/// consecutive failures a circuit breaker stops calling the store and lets one
/// probe through per interval; meanwhile the failure policy decides. Each
/// part of the store that fails on its own ([`Capabilities::failure_domain`](crate::Capabilities::failure_domain): a node
/// of a Redis Cluster) has a breaker of its own, so a dead node costs only
/// the keys it serves. Denials
/// are remembered locally until they end, so a flood from a denied client
/// costs no store calls.
///
/// A call that missed its deadline is never sent again: it may have executed.
/// Clones share everything.
///
/// ```
/// use limiter_core::{GuardConfig, Guarded, Limiter, OnStoreError, Store};
///
/// // `redis`: a `limiter_redis::RedisStore`, or any store that crosses a network.
/// fn guarded(redis: impl Store) -> Limiter<impl Store> {
///     let config = GuardConfig {
///     on_store_error: OnStoreError::Fallback { instances: 4 },
///     ..GuardConfig::default()
/// };
///     Limiter::new(Guarded::new(redis, config))
/// }
/// ```
pub struct Guarded<S, C = SystemClock> {
    inner: Arc<Inner<S, C>>,
}

struct Inner<S, C> {
    store: S,
    config: GuardConfig,
    clock: C,
    breakers: Breakers<C>,
    deny_cache: Option<DenyCache>,
    fallback: MemoryStore<C>,
}

impl<S: Store> Guarded<S, SystemClock> {
    /// Guards `store` on the system clock.
    pub fn new(store: S, config: GuardConfig) -> Self {
        Self::with_clock(store, config, SystemClock)
    }
}

impl<S: Store, C: Clock + Clone> Guarded<S, C> {
    /// Guards `store`, timing the breaker, the deny cache and the fallback by `clock`.
    pub fn with_clock(store: S, config: GuardConfig, clock: C) -> Self {
        let guarded = Self {
            inner: Arc::new(Inner {
                // A probe ends within its deadline unless its future stalls.
                breakers: Breakers::new(
                    config.breaker,
                    config.breaker.probe_interval.max(2 * config.deadline),
                    clock.clone(),
                ),
                deny_cache: (config.deny_cache_capacity > 0)
                    .then(|| DenyCache::new(config.deny_cache_capacity)),
                fallback: MemoryStore::with_clock(clock.clone())
                    .with_capacity(config.fallback_capacity),
                store,
                config,
                clock,
            }),
        };
        // A key reset by another instance loses its cached denial here.
        let inner = Arc::downgrade(&guarded.inner);
        if let Some(announcer) = guarded.inner.store.as_shared_control() {
            announcer.on_reset(Box::new(move |forget| {
                let Some(inner) = inner.upgrade() else {
                    return false;
                };
                if let Some(cache) = &inner.deny_cache {
                    match forget {
                        Forget::Key(key) => cache.remove(key),
                        Forget::Everything => cache.clear(),
                    }
                }
                true
            }));
        }
        guarded
    }

    /// The guarded store.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The settings.
    pub fn config(&self) -> &GuardConfig {
        &self.inner.config
    }

    /// The state of the circuit breaker of the whole store (of a store
    /// that fails as a whole: see [`breaker_state_of`](Self::breaker_state_of)).
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breakers.whole().state()
    }

    /// The state of the circuit breaker that guards `key`: the breaker of
    /// the part of the store serving it
    /// ([`Capabilities::failure_domain`](crate::Capabilities::failure_domain)), such as
    /// a node of a Redis Cluster.
    pub fn breaker_state_of(&self, key: &str) -> BreakerState {
        self.breaker(&Key::from(key)).state()
    }

    fn breaker(&self, key: &Key) -> super::domains::BreakerRef<'_, C> {
        let store = &self.inner.store;
        let domain = store.failure_domain(key);
        self.inner
            .breakers
            .get(domain, || store.failure_domain_name(domain))
    }

    /// Checks like [`Store::check`], deciding by `on_error` if the store fails.
    pub async fn check_with(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
        on_error: OnStoreError,
    ) -> Result<Verdict, Error> {
        let store = &self.inner.store;
        let check = || async move { Ok((store.check(key, policy, cost).await?, ())) };
        Ok(self
            .decide_with(key, policy, cost, on_error, check)
            .await?
            .0)
    }

    /// The guarded check of `check`, which answers a decision and what the
    /// store says of it besides (a refund's receipt): `None` when the deny
    /// cache or the failure policy decided.
    async fn decide_with<T, F: Future<Output = Result<(Decision, T), Error>>>(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u64,
        on_error: OnStoreError,
        check: impl FnOnce() -> F,
    ) -> Result<(Verdict, Option<T>), Error> {
        // A caller's mistake is refused before the breaker admits the call:
        // a probe must end in a success or a failure.
        policy.validate_cost(cost)?;
        let inner = &*self.inner;
        let now = inner.clock.now_micros();
        if let Some(decision) = inner
            .deny_cache
            .as_ref()
            .and_then(|c| c.get(key.as_str(), cost, now))
            .filter(|d| denied_by_rule_of(d, policy))
        {
            metrics::counter!("limiter_deny_cache_hits_total").increment(1);
            return Ok((Verdict::Cached(decision), None));
        }
        let breaker = self.breaker(key);
        match self.call(&breaker, check).await {
            Called::Answered(answer) => {
                let (decision, besides) = answer?;
                if let Some(cache) = inner.deny_cache.as_ref().filter(|_| !decision.allowed()) {
                    cache.insert(key.as_str(), cost, now, decision);
                }
                Ok((Verdict::Store(decision), Some(besides)))
            }
            Called::Failed(error) => {
                warn_failed(error.as_ref(), on_error);
                Ok((
                    self.on_failure(&breaker, key, policy, cost, on_error)?,
                    None,
                ))
            }
        }
    }

    /// The guard's one sequence around every kind of store call: the
    /// breaker of the part of the store serving the key admits it (or
    /// skips it while that part is down), the deadline bounds it, its time
    /// is recorded, and the breaker learns how it ended. A caller's
    /// mistake ([`Error::Config`]) or a capability the store lacks
    /// ([`Error::Unsupported`]) is an answer: the store did not fail.
    ///
    /// Takes the call as a function that makes its future, so that the
    /// future is made only once the breaker admits it and is stored once
    /// (an `async fn` argument would be stored twice).
    async fn call<T, F: Future<Output = Result<T, Error>>>(
        &self,
        breaker: &Breaker<C>,
        call: impl FnOnce() -> F,
    ) -> Called<Result<T, Error>> {
        let admission = breaker.admit();
        if matches!(admission, Admission::Skip) {
            return Called::Failed(None);
        }
        // Dropped at this await (the request was cancelled), `admission`
        // gives a probe back: the breaker never waits for a probe that is gone.
        let started = Instant::now();
        let outcome = self.within_deadline(call).await;
        metrics::histogram!("limiter_store_call_seconds").record(started.elapsed().as_secs_f64());
        match outcome {
            Err(error)
                if !matches!(
                    error,
                    Error::Config(_) | Error::Unsupported(_) | Error::Full(_)
                ) =>
            {
                metrics::counter!("limiter_store_errors_total", "kind" => error.kind())
                    .increment(1);
                breaker.failed(admission);
                Called::Failed(Some(error))
            }
            answer => {
                breaker.succeeded(admission);
                Called::Answered(answer)
            }
        }
    }

    /// The call `call` makes, or [`Error::Timeout`] once the deadline has
    /// passed. A store that bounds its calls itself within the deadline
    /// ([`Capabilities::deadline`](crate::Capabilities::deadline)) keeps the one timer of the call.
    async fn within_deadline<T, F: Future<Output = Result<T, Error>>>(
        &self,
        call: impl FnOnce() -> F,
    ) -> Result<T, Error> {
        let deadline = self.inner.config.deadline;
        match self.inner.store.deadline() {
            Some(own) if own <= deadline => call().await,
            _ => tokio::time::timeout(deadline, call())
                .await
                .unwrap_or(Err(Error::Timeout(deadline))),
        }
    }

    fn on_failure(
        &self,
        breaker: &Breaker<C>,
        key: &Key,
        policy: &Policy,
        cost: u64,
        on_error: OnStoreError,
    ) -> Result<Verdict, Error> {
        metrics::counter!("limiter_fallback_decisions_total", "policy" => on_error.name())
            .increment(1);
        match on_error {
            OnStoreError::Fallback { instances } => {
                let share = policy.divided(instances);
                // A cost above the share's capacity is capped to it.
                let decision =
                    self.inner
                        .fallback
                        .check_now(key, &share, cost.min(share.largest_cost()))?;
                Ok(Verdict::Fallback(decision))
            }
            OnStoreError::FailOpen => Ok(Verdict::FailedOpen),
            OnStoreError::FailClosed => Ok(Verdict::FailedClosed {
                retry_after: breaker.until_probe().max(Duration::from_secs(1)),
            }),
        }
    }
}

/// How a guarded call ended.
enum Called<T> {
    /// The store answered.
    Answered(T),
    /// The store failed (`Some`) or its breaker skipped it (`None`): the
    /// failure policy decides.
    Failed(Option<Error>),
}

/// Logs a store's failure, which `on_error` then decides.
fn warn_failed(error: Option<&Error>, on_error: OnStoreError) {
    if let Some(error) = error {
        tracing::warn!(%error, policy = on_error.name(), "rate-limit store failed");
    }
}

/// Whether `policy` holds the rule that made `denial` (a key's policy can
/// change, with its plan): only then does the denial last as long for it.
fn denied_by_rule_of(denial: &Decision, policy: &Policy) -> bool {
    denial.rules().len() == policy.rules().len()
        && policy.rules().get(denial.rule_index()) == Some(&denial.rule())
}

impl<S: Store, C: Clock + Clone> Guarded<S, C> {
    /// Takes a permit like [`Permits::acquire_permit`](crate::Permits::acquire_permit), deciding by
    /// `on_error` if the store fails: the fallback takes a permit of the
    /// local memory store, its limit divided by the number of instances;
    /// failing open answers a permit that holds nothing; failing closed
    /// answers [`Error::Unavailable`]. The permit is given back to the store
    /// that gave it.
    pub async fn acquire_permit_with(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
        on_error: OnStoreError,
    ) -> Result<Acquired, Error> {
        let permits = required(self.inner.store.as_permits(), "concurrency limits")?;
        let inner = &*self.inner;
        let breaker = self.breaker(&Key::from(key));
        match self
            .call(&breaker, || permits.acquire_permit(key, limit))
            .await
        {
            Called::Answered(answer) => return answer,
            Called::Failed(error) => warn_failed(error.as_ref(), on_error),
        }
        metrics::counter!("limiter_fallback_decisions_total", "policy" => on_error.name())
            .increment(1);
        match on_error {
            OnStoreError::Fallback { instances } => Ok(inner
                .fallback
                .acquire_permit_now(key, &limit.divided(instances))),
            OnStoreError::FailOpen => Ok(Acquired::Permit(Permit::unchecked(limit))),
            OnStoreError::FailClosed => Err(Error::Unavailable(
                breaker.until_probe().max(Duration::from_secs(1)),
            )),
        }
    }
}

#[path = "guarded_capabilities.rs"]
mod capabilities;

impl<S, C> Clone for Guarded<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for Guarded<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded")
            .field("store", &self.inner.store)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "guarded_tests.rs"]
mod tests;
