use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::breaker::{Admission, Breaker, BreakerConfig, BreakerState};
use super::deny_cache::{DEFAULT_DENY_CACHE_CAPACITY, DenyCache};
use super::domains::Breakers;
use crate::clock::{Clock, SystemClock};
use crate::concurrency::{Acquired, ConcurrencyLimit, Permit};
use crate::decision::Decision;
use crate::error::Error;
use crate::policy::Policy;
use crate::store::Store;
use crate::store::memory::MemoryStore;

/// How long one store call may take unless configured: tens of
/// milliseconds, not the client's default of half a second.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(50);

/// What to decide when the store cannot answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStoreError {
    /// Decide with a local in-memory limiter applying the same policy, each
    /// limit divided by `instances` (the number of instances sharing the
    /// store), so together they stay near the shared limit. The default, with
    /// `instances: 1`.
    Fallback {
        /// The number of instances sharing the store (at least 1).
        instances: u32,
    },
    /// Let the request through.
    FailOpen,
    /// Refuse the request (the HTTP layer answers 503 with `Retry-After`).
    FailClosed,
}

impl Default for OnStoreError {
    fn default() -> Self {
        Self::Fallback { instances: 1 }
    }
}

impl OnStoreError {
    /// The name used in metrics and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Fallback { .. } => "fallback",
            Self::FailOpen => "fail_open",
            Self::FailClosed => "fail_closed",
        }
    }
}

/// How a check was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// By the store.
    Store(Decision),
    /// By the local deny cache: the store denied this key earlier, until later than now.
    Cached(Decision),
    /// By the local fallback limiter, the store having failed or the breaker being open.
    Fallback(Decision),
    /// Let through unchecked, the store having failed (fail open).
    FailedOpen,
    /// Refused unchecked, the store having failed (fail closed); the store
    /// will be probed again after `retry_after`.
    FailedClosed {
        /// Until the breaker's next probe (at least one second).
        retry_after: Duration,
    },
}

impl Verdict {
    /// The decision, when there is one.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Self::Store(d) | Self::Cached(d) | Self::Fallback(d) => Some(d),
            Self::FailedOpen | Self::FailedClosed { .. } => None,
        }
    }

    /// Whether the request may proceed.
    pub fn allowed(&self) -> bool {
        match self {
            Self::Store(d) | Self::Cached(d) | Self::Fallback(d) => d.allowed(),
            Self::FailedOpen => true,
            Self::FailedClosed { .. } => false,
        }
    }
}

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
/// part of the store that fails on its own ([`Store::failure_domain`]: a node
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
        Self {
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
        }
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
    /// the part of the store serving it ([`Store::failure_domain`]), such as
    /// a node of a Redis Cluster.
    pub fn breaker_state_of(&self, key: &str) -> BreakerState {
        self.breaker(key).state()
    }

    fn breaker(&self, key: &str) -> super::domains::BreakerRef<'_, C> {
        let store = &self.inner.store;
        let domain = store.failure_domain(key);
        self.inner
            .breakers
            .get(domain, || store.failure_domain_name(domain))
    }

    /// Checks like [`Store::check`], deciding by `on_error` if the store fails.
    pub async fn check_with(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: OnStoreError,
    ) -> Result<Verdict, Error> {
        // A caller's mistake is refused before the breaker admits the call:
        // a probe must end in a success or a failure.
        policy.validate_cost(cost)?;
        let inner = &*self.inner;
        let now = inner.clock.now_micros();
        if let Some(decision) = inner
            .deny_cache
            .as_ref()
            .and_then(|c| c.get(key, cost, now))
            .filter(|d| denied_by_rule_of(d, policy))
        {
            metrics::counter!("limiter_deny_cache_hits_total").increment(1);
            return Ok(Verdict::Cached(decision));
        }
        // Each part of the store that fails on its own has its breaker.
        let breaker = self.breaker(key);
        let admission = breaker.admit();
        if matches!(admission, Admission::Skip) {
            return self.on_failure(&breaker, key, policy, cost, on_error);
        }
        // Dropped at this await (the request was cancelled), `admission`
        // gives a probe back: the breaker never waits for a probe that is gone.
        let started = Instant::now();
        let outcome =
            tokio::time::timeout(inner.config.deadline, inner.store.check(key, policy, cost))
                .await
                .unwrap_or(Err(Error::Timeout(inner.config.deadline)));
        metrics::histogram!("limiter_store_call_seconds").record(started.elapsed().as_secs_f64());
        match outcome {
            Ok(decision) => {
                breaker.succeeded(admission);
                if let Some(cache) = inner.deny_cache.as_ref().filter(|_| !decision.allowed()) {
                    cache.insert(key, cost, now, decision);
                }
                Ok(Verdict::Store(decision))
            }
            Err(error) => {
                metrics::counter!("limiter_store_errors_total", "kind" => error.kind())
                    .increment(1);
                tracing::warn!(%error, policy = on_error.name(), "rate-limit store failed");
                breaker.failed(admission);
                self.on_failure(&breaker, key, policy, cost, on_error)
            }
        }
    }

    fn on_failure(
        &self,
        breaker: &Breaker<C>,
        key: &str,
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

/// Whether `policy` holds the rule that made `denial` (a key's policy can
/// change, with its plan): only then does the denial last as long for it.
fn denied_by_rule_of(denial: &Decision, policy: &Policy) -> bool {
    denial.rules().len() == policy.rules().len()
        && policy.rules().get(denial.rule_index()) == Some(&denial.rule())
}

impl<S: Store, C: Clock + Clone> Guarded<S, C> {
    /// Takes a permit like [`Store::acquire_permit`], deciding by
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
        let inner = &*self.inner;
        let breaker = self.breaker(key);
        let admission = breaker.admit();
        if !matches!(admission, Admission::Skip) {
            let started = Instant::now();
            let outcome = tokio::time::timeout(
                inner.config.deadline,
                inner.store.acquire_permit(key, limit),
            )
            .await
            .unwrap_or(Err(Error::Timeout(inner.config.deadline)));
            metrics::histogram!("limiter_store_call_seconds")
                .record(started.elapsed().as_secs_f64());
            match outcome {
                Ok(acquired) => {
                    breaker.succeeded(admission);
                    return Ok(acquired);
                }
                // A store that keeps no permits did not fail.
                Err(error @ Error::Unsupported(_)) => {
                    breaker.succeeded(admission);
                    return Err(error);
                }
                Err(error) => {
                    metrics::counter!("limiter_store_errors_total", "kind" => error.kind())
                        .increment(1);
                    tracing::warn!(%error, policy = on_error.name(), "rate-limit store failed");
                    breaker.failed(admission);
                }
            }
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

impl<S: Store, C: Clock + Clone> Store for Guarded<S, C> {
    /// Checks with the configured failure policy. Failing open answers an
    /// allowed decision with every rule's whole quota remaining; failing
    /// closed answers [`Error::Unavailable`].
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        match self
            .check_with(key, policy, cost, self.inner.config.on_store_error)
            .await?
        {
            Verdict::Store(d) | Verdict::Cached(d) | Verdict::Fallback(d) => Ok(d),
            Verdict::FailedOpen => Ok(Decision::unchecked(policy)),
            Verdict::FailedClosed { retry_after } => Err(Error::Unavailable(retry_after)),
        }
    }

    fn failure_domain(&self, key: &str) -> u64 {
        self.inner.store.failure_domain(key)
    }

    fn failure_domain_name(&self, domain: u64) -> String {
        self.inner.store.failure_domain_name(domain)
    }

    fn is_guarded(&self) -> bool {
        true
    }

    fn check_verdict(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        on_error: Option<OnStoreError>,
    ) -> impl Future<Output = Result<Verdict, Error>> + Send {
        let on_error = on_error.unwrap_or(self.inner.config.on_store_error);
        self.check_with(key, policy, cost, on_error)
    }

    fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        self.acquire_permit_with(key, limit, self.inner.config.on_store_error)
    }

    fn acquire_permit_on_error(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
        on_error: Option<OnStoreError>,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        let on_error = on_error.unwrap_or(self.inner.config.on_store_error);
        self.acquire_permit_with(key, limit, on_error)
    }

    /// Within the deadline, through the key's breaker: an open breaker
    /// answers [`Error::Unavailable`] at once, and the caller
    /// ([`HotKeys`](crate::HotKeys)) then checks through
    /// [`check_verdict`](Store::check_verdict), which applies the failure policy.
    async fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &crate::hot::LeaseRequest,
    ) -> Result<crate::hot::LeaseGrant, Error> {
        let breaker = self.breaker(key);
        let admission = breaker.admit();
        if matches!(admission, Admission::Skip) {
            return Err(Error::Unavailable(breaker.until_probe()));
        }
        let deadline = self.inner.config.deadline;
        let outcome = tokio::time::timeout(deadline, self.inner.store.lease(key, policy, request))
            .await
            .unwrap_or(Err(Error::Timeout(deadline)));
        match &outcome {
            Ok(_) => breaker.succeeded(admission),
            Err(Error::Config(_)) => breaker.succeeded(admission),
            Err(error) => {
                metrics::counter!("limiter_store_errors_total", "kind" => error.kind())
                    .increment(1);
                breaker.failed(admission);
            }
        }
        outcome
    }

    async fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &crate::hot::LeaseGrant,
        unused: u64,
    ) -> Result<u64, Error> {
        let deadline = self.inner.config.deadline;
        tokio::time::timeout(
            deadline,
            self.inner.store.end_lease(key, policy, grant, unused),
        )
        .await
        .unwrap_or(Err(Error::Timeout(deadline)))
    }
}

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
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::{ManualClock, Rule};

    /// A store that is down: every call fails, and is counted.
    #[derive(Debug, Default)]
    struct Down {
        calls: AtomicUsize,
    }

    impl Store for Down {
        async fn check(&self, _: &str, _: &Policy, _: u64) -> Result<Decision, Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::Protocol("down".into()))
        }
    }

    fn policy() -> Policy {
        Policy::sliding_log([Rule::new(4, Duration::from_secs(60)).unwrap()]).unwrap()
    }

    #[tokio::test]
    async fn each_policy_decides_while_the_store_is_down() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let guarded = Guarded::with_clock(Down::default(), GuardConfig::default(), clock.clone());
        // Fallback, limits halved for 2 instances: 2 of 4 pass here.
        let fallback = OnStoreError::Fallback { instances: 2 };
        let mut allowed = Vec::new();
        for _ in 0..3 {
            let verdict = guarded
                .check_with("k", &policy(), 1, fallback)
                .await
                .unwrap();
            assert!(matches!(verdict, Verdict::Fallback(_)));
            allowed.push(verdict.allowed());
        }
        assert_eq!(allowed, [true, true, false]);
        let open = guarded
            .check_with("k", &policy(), 1, OnStoreError::FailOpen)
            .await
            .unwrap();
        assert_eq!(open, Verdict::FailedOpen);
        let closed = guarded
            .check_with("k", &policy(), 1, OnStoreError::FailClosed)
            .await
            .unwrap();
        assert_eq!(
            closed,
            Verdict::FailedClosed {
                retry_after: Duration::from_secs(1)
            }
        );
        // Three failures opened the breaker: the later calls skipped the store.
        assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 3);
        assert_eq!(guarded.breaker_state(), BreakerState::Open);
        clock.advance(Duration::from_secs(1));
        guarded
            .check_with("k", &policy(), 1, fallback)
            .await
            .unwrap();
        assert_eq!(
            guarded.store().calls.load(Ordering::SeqCst),
            4,
            "one probe per interval"
        );
    }

    #[tokio::test]
    async fn a_probe_with_an_invalid_cost_leaves_the_breaker_probing_again() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let guarded = Guarded::with_clock(Down::default(), GuardConfig::default(), clock.clone());
        for _ in 0..3 {
            guarded
                .check_with("k", &policy(), 1, OnStoreError::FailOpen)
                .await
                .unwrap();
        }
        assert_eq!(guarded.breaker_state(), BreakerState::Open);
        clock.advance(Duration::from_secs(1));
        // Refused before the breaker admits it: not the probe.
        let refused = guarded
            .check_with("k", &policy(), 5, OnStoreError::FailOpen)
            .await;
        assert!(matches!(refused, Err(Error::Config(_))));
        guarded
            .check_with("k", &policy(), 1, OnStoreError::FailOpen)
            .await
            .unwrap();
        assert_eq!(
            guarded.store().calls.load(Ordering::SeqCst),
            4,
            "the next call probes"
        );
    }

    /// A store that fails, hangs or answers, as the test says.
    #[derive(Debug, Default)]
    struct Switch {
        /// 0 fails, 1 hangs, 2 answers (allowing everything).
        mode: std::sync::atomic::AtomicU8,
        calls: AtomicUsize,
    }

    impl Store for Switch {
        async fn check(&self, _: &str, policy: &Policy, _: u64) -> Result<Decision, Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            match self.mode.load(Ordering::SeqCst) {
                0 => Err(Error::Protocol("down".into())),
                1 => std::future::pending().await,
                _ => Ok(Decision::unchecked(policy)),
            }
        }
    }

    #[tokio::test]
    async fn a_cancelled_probe_does_not_keep_the_breaker_open() {
        use futures_util::FutureExt;

        let clock = ManualClock::new(Duration::from_secs(1_000));
        let guarded = Guarded::with_clock(Switch::default(), GuardConfig::default(), clock.clone());
        let fail_open = OnStoreError::FailOpen;
        for _ in 0..3 {
            guarded
                .check_with("k", &policy(), 1, fail_open)
                .await
                .unwrap();
        }
        assert_eq!(guarded.breaker_state(), BreakerState::Open);
        clock.advance(Duration::from_secs(1));
        // The probe reaches a hung store; its request is cancelled there.
        guarded.store().mode.store(1, Ordering::SeqCst);
        let hung = policy();
        let probe = guarded.check_with("k", &hung, 1, fail_open);
        assert!(
            probe.now_or_never().is_none(),
            "the probe waits on the store"
        );
        assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 4);
        assert_eq!(guarded.breaker_state(), BreakerState::Open);
        // The store is back: the very next call probes it and closes the breaker.
        guarded.store().mode.store(2, Ordering::SeqCst);
        let verdict = guarded
            .check_with("k", &policy(), 1, fail_open)
            .await
            .unwrap();
        assert!(matches!(verdict, Verdict::Store(_)));
        assert_eq!(guarded.breaker_state(), BreakerState::Closed);
        assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn a_denial_is_answered_locally_until_it_ends() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let memory = MemoryStore::with_clock(clock.clone());
        let counted = Counted {
            inner: memory,
            calls: AtomicUsize::new(0),
        };
        let guarded = Guarded::with_clock(counted, GuardConfig::default(), clock.clone());
        let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(10)).unwrap()]).unwrap();
        assert!(guarded.check("k", &policy, 1).await.unwrap().allowed());
        for _ in 0..100 {
            let denied = guarded.check("k", &policy, 1).await.unwrap();
            assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
        }
        assert_eq!(
            guarded.store().calls.load(Ordering::SeqCst),
            2,
            "one denial from the store"
        );
        clock.advance(Duration::from_secs(10));
        assert!(guarded.check("k", &policy, 1).await.unwrap().allowed());
        assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_cached_denial_serves_only_a_policy_with_the_rule_that_denied() {
        let clock = ManualClock::new(Duration::from_secs(1_000));
        let memory = MemoryStore::with_clock(clock.clone());
        let counted = Counted {
            inner: memory,
            calls: AtomicUsize::new(0),
        };
        let guarded = Guarded::with_clock(counted, GuardConfig::default(), clock.clone());
        let per_minute =
            |n| Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]).unwrap();
        let (free, pro) = (per_minute(1), per_minute(5));
        assert!(guarded.check("k", &free, 1).await.unwrap().allowed());
        assert!(!guarded.check("k", &free, 1).await.unwrap().allowed());
        assert!(!guarded.check("k", &free, 1).await.unwrap().allowed());
        assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 2);
        // The key's plan is raised: its cached denial by 1-per-60s does not hold.
        assert!(guarded.check("k", &pro, 1).await.unwrap().allowed());
        assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 3);
    }

    #[derive(Debug)]
    struct Counted {
        inner: MemoryStore<ManualClock>,
        calls: AtomicUsize,
    }

    impl Store for Counted {
        async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.inner.check(key, policy, cost).await
        }
    }
}
