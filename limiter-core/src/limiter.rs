//! The programmatic API: a store plus a key prefix.

use std::sync::Arc;
use std::time::Duration;

use crate::attempt::Attempt;
use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::decide::{Offenders, Shared, default_instance, tables_of, unguarded};
use crate::hot::HotKeys;
use crate::identity::Identity;
use crate::store::Store;
use crate::wait::Waiters;
use crate::{Change, KeyState, Permits, SharedControl};
use crate::{Decision, Error, Policy};

/// The key prefix unless another is set: keys look like `rate_limit:user={user}:{action}`.
pub const DEFAULT_PREFIX: &str = "rate_limit";

/// Rate limiting for anything, not only HTTP routes: a [`Store`] and a key prefix.
///
/// An application with an HTTP layer holds one handle instead: the layer's
/// `Control` (limiter-tower) answers each call here, by the same name and
/// through the same steps ([`decide::Shared`](crate::decide::Shared)), on
/// the layer's guarded store, besides its named limits' calls. Only
/// `reset` differs there: it forgets an identity's limits, and `reset_key`
/// is this one.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Limiter, MemoryStore};
///
/// # tokio_test_block(async {
/// let limiter = Limiter::new(MemoryStore::new());
/// // "May laoqian reply again? At most 5 replies a minute."
/// for _ in 0..5 {
///     assert!(limiter.is_action_allowed("laoqian", "reply", Duration::from_secs(60), 5).await?);
/// }
/// assert!(!limiter.is_action_allowed("laoqian", "reply", Duration::from_secs(60), 5).await?);
/// assert!(limiter.is_action_allowed("xiaoming", "reply", Duration::from_secs(60), 5).await?);
/// # Ok::<(), limiter_core::Error>(())
/// # });
/// # fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Limiter<S> {
    /// The store, honouring the policies' hot-key modes.
    store: HotKeys<S>,
    /// What its checks share with every check of a named limit (see
    /// [`decide`](crate::decide)): the same store, its tables, the key
    /// prefix and the waiting queues; checks of its keys take its steps.
    shared: Shared,
}

impl<S: Store> Limiter<S> {
    /// A limiter over `store` with the prefix [`DEFAULT_PREFIX`].
    pub fn new(store: S) -> Self {
        Self::from_hot_keys(HotKeys::new(store))
    }

    /// A limiter over a store whose hot-key modes keep their state as
    /// `store` says (such as on a test's clock: [`HotKeys::with_clock`]).
    pub fn from_hot_keys(store: HotKeys<S>) -> Self {
        let erased = unguarded(store.clone());
        let shared = Shared {
            tables: tables_of(&*erased),
            store: erased,
            on_store_error: None,
            key_start: format!("{DEFAULT_PREFIX}:").into(),
            waiters: Waiters::new(),
            // Its keys name no limit: nobody is counted among offenders.
            offenders: Arc::new(Offenders::new(default_instance(), Duration::ZERO)),
        };
        Self { store, shared }
    }

    /// Sets the prefix of every key this limiter builds.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        let mut start = prefix.into();
        start.push(':');
        self.shared.key_start = start.into_boxed_str();
        self
    }

    /// Sets the queues [`acquire`](Self::acquire) waits in (their clock
    /// and bound; by default [`Waiters::new`]).
    pub fn with_waiters(mut self, waiters: Waiters) -> Self {
        self.shared.waiters = waiters;
        self
    }

    /// Whether `user` may perform `action` again: at most `max_count` times in
    /// any `period` (a sliding log), counted on the key
    /// `{prefix}:user={user}:{action}` ([`Identity::user`]'s key). A blocked
    /// user may not.
    ///
    /// `user` and `action` are escaped, so neither can change the key's shape.
    /// Fails with [`Error::Config`] for a zero `period` or `max_count`.
    pub async fn is_action_allowed(
        &self,
        user: &str,
        action: &str,
        period: Duration,
        max_count: u64,
    ) -> Result<bool, Error> {
        (self.shared)
            .is_action_allowed(user, action, period, max_count)
            .await
    }

    /// Checks a request on `{prefix}:{key}` at the policy's cost and records it if allowed.
    ///
    /// A policy's hot-key mode ([`Policy::with_lease`],
    /// [`with_shards`](Policy::with_shards),
    /// [`with_sampling`](Policy::with_sampling)) is honoured here.
    pub async fn check(&self, key: &str, policy: &Policy) -> Result<Decision, Error> {
        self.check_with_cost(key, policy, policy.cost()).await
    }

    /// Checks a request of `cost` (tokens, or log entries) on `{prefix}:{key}`.
    /// `key` is used as given: escape untrusted parts with
    /// [`push_identity`](crate::push_identity).
    pub async fn check_with_cost(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        self.shared
            .check_key(self.shared.key(key), policy, cost)
            .await
    }

    /// Checks a request on `{prefix}:{key}` like [`check`](Self::check),
    /// but waits instead of being denied while its retry time is at most
    /// `max_wait` away (Guava's `acquire`): then it is checked again, in
    /// turn with the other waiters of the key (see [`Waiters`]). Answers the
    /// allowing decision, or the denial once waiting cannot help.
    ///
    /// Dropping the future (the caller gave up) leaves the queue; nothing
    /// was recorded for the request unless it was allowed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Limiter, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let limiter = Limiter::new(MemoryStore::new());
    /// let policy = Policy::sliding_log([Rule::new(1, Duration::from_millis(20))?])?;
    /// assert!(limiter.check("exports", &policy).await?.allowed());
    /// // The next one passes 20 ms later: within the bound, so it waits.
    /// assert!(limiter.acquire("exports", &policy, Duration::from_secs(1)).await?.allowed());
    /// // Beyond the bound: denied at once.
    /// assert!(!limiter.acquire("exports", &policy, Duration::from_millis(1)).await?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn acquire(
        &self,
        key: &str,
        policy: &Policy,
        max_wait: Duration,
    ) -> Result<Decision, Error> {
        let key = self.shared.key(key);
        self.shared.acquire_key(key, policy, max_wait).await
    }

    /// Takes a permit of `limit` on `{prefix}:{key}` when fewer than
    /// [`limit.max()`](ConcurrencyLimit::max) are held (see
    /// [`ConcurrencyLimit`]); the permit is given back when dropped.
    pub async fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> Result<Acquired, Error>
    where
        S: Permits,
    {
        self.shared.permit_key(self.shared.key(key), limit).await
    }

    /// What [`check`](Self::check) would answer now on `{prefix}:{key}`
    /// (allowed, remaining per rule, retry after, reset after), recording
    /// nothing: to show a user their quota without using it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Limiter, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::new(MemoryStore::new());
    /// let policy = Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?;
    /// limiter.check("alice:reply", &policy).await?;
    /// let now = limiter.peek("alice:reply", &policy).await?;
    /// assert_eq!(now.remaining(), 3); // what the next request would leave
    /// assert_eq!(limiter.peek("alice:reply", &policy).await?.remaining(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn peek(&self, key: &str, policy: &Policy) -> Result<Decision, Error>
    where
        S: KeyState,
    {
        self.shared.peek_key(&self.shared.key(key), policy).await
    }

    /// Forgets the state of `{prefix}:{key}` under `policy`: the next check
    /// finds the whole quota (after a captcha, an administrator's decision).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Limiter, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::new(MemoryStore::new());
    /// let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?;
    /// assert!(limiter.check("bob:login", &policy).await?.allowed());
    /// assert!(!limiter.check("bob:login", &policy).await?.allowed());
    /// limiter.reset("bob:login", &policy).await?;
    /// assert!(limiter.check("bob:login", &policy).await?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error>
    where
        S: KeyState,
    {
        self.shared.reset_key(&self.shared.key(key), policy).await
    }

    /// Checks a request on `{prefix}:{key}` that counts only if its outcome
    /// says so: it is recorded now (so requests in flight count, and no
    /// more pass than `policy` allows), and given back by
    /// [`Attempt::refund`] when it turns out not to count. An attempt
    /// dropped without a refund stays counted.
    ///
    /// Fails with [`Error::Config`] for a policy whose algorithm cannot
    /// give a request back exactly ([`Policy::counts_by_outcome`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Limiter, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::new(MemoryStore::new());
    /// // At most 5 failed logins per user in 15 minutes.
    /// let failures = Policy::sliding_log([Rule::new(5, Duration::from_secs(900))?])?;
    /// for _ in 0..100 {
    ///     let attempt = limiter.attempt("login:ada", &failures).await?;
    ///     assert!(attempt.decision().allowed());
    ///     let password_ok = true;
    ///     if password_ok {
    ///         attempt.refund().await?; // a success never counts
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn attempt(&self, key: &str, policy: &Policy) -> Result<Attempt, Error>
    where
        S: KeyState,
    {
        self.shared.attempt_key(self.shared.key(key), policy).await
    }

    /// Blocks `identity` (the key `{prefix}:{identity}`, its kind's
    /// marker and its escaped value: see [`Identity`]) for `duration`, on
    /// every instance sharing the store. The HTTP layers deny every request
    /// of a blocked identity with 429 until the block ends, and this
    /// limiter's checks of a key that starts with the identity
    /// (`{prefix}:{identity}:...`, as [`is_action_allowed`](Self::is_action_allowed)
    /// and [`Identity::push_key`] build them) are denied with the block's
    /// time left. The HTTP layers group an IPv6 client by its network (a
    /// /64 by default): block it here as `Identity::network(addr, 64)`
    /// (`Control::block` groups an address itself).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Identity, Limiter, MemoryStore};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::new(MemoryStore::new());
    /// let mallory = Identity::user("mallory");
    /// limiter.block(&mallory, Duration::from_secs(900)).await?;
    /// assert!(limiter.blocked(&mallory).is_some());
    /// assert!(!limiter.is_action_allowed("mallory", "reply", Duration::from_secs(60), 5).await?);
    /// // The address 127.0.0.1 is another identity.
    /// assert_eq!(limiter.blocked(&Identity::ip([127, 0, 0, 1].into())), None);
    /// limiter.unblock(&mallory).await?;
    /// assert_eq!(limiter.blocked(&mallory), None);
    /// # Ok::<(), limiter_core::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn block(&self, identity: &Identity, duration: Duration) -> Result<(), Error>
    where
        S: SharedControl,
    {
        let key = self.identity_key(identity);
        let block = Change::Block {
            key: &key,
            duration,
            origin: crate::BlockOrigin::Operator,
        };
        self.store.store().change(block).await
    }

    /// Lifts `identity`'s block, on every instance sharing the store.
    pub async fn unblock(&self, identity: &Identity) -> Result<(), Error>
    where
        S: SharedControl,
    {
        let key = self.identity_key(identity);
        self.store
            .store()
            .change(Change::Unblock { key: &key })
            .await
    }

    /// How long `identity` stays blocked, as this instance knows it now.
    pub fn blocked(&self, identity: &Identity) -> Option<Duration>
    where
        S: SharedControl,
    {
        (self.store.store().tables()).blocked(&self.identity_key(identity))
    }

    /// `{prefix}:{identity}`: the key of `identity`'s block, and how its
    /// limits' keys start (append `:{action}`).
    pub fn identity_key(&self, identity: &Identity) -> String {
        let mut key = String::from(&*self.shared.key_start);
        identity.push_key(&mut key);
        key
    }

    /// The store.
    pub fn store(&self) -> &S {
        self.store.store()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        self.shared.prefix()
    }
}
