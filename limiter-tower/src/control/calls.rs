//! Everything a [`Control`] does, each call in its concept's module
//! (`attempt.rs`, `blocks.rs`, `overrides.rs`, `offenders.rs`,
//! `router.rs`, `state.rs`), or for a key no limit names in
//! [`limiter_core::decide::Shared`], as `Limiter`'s; with `mod.rs` (how
//! it is made), the whole of its interface.

use std::time::Duration;

use axum::Router;
use limiter_core::{Acquired, Attempt, ConcurrencyLimit, ListedBlock, Override, OverrideMode};

use super::*;

/// The calls of a [`Limiter`](crate::Limiter), on keys that name no limit: a program with a
/// layer holds this one handle. Each takes the steps its namesake takes
/// (one implementation, [`limiter_core::decide::Shared`]) through the
/// layer's store: its guard and failure policy, its hot-key state, its
/// waiting queues. Only [`reset`](Self::reset) differs: here it forgets an
/// identity's limits, and [`reset_key`](Self::reset_key) forgets a key.
impl Control {
    /// Checks a request on `{prefix}:{key}` against `policy` and records
    /// it if allowed, as [`Limiter::check`](crate::Limiter::check) does (denied while the
    /// identity `key` starts with is blocked): the programmatic API of an
    /// application whose store was chosen at run time, with no store type
    /// to name. A denial becomes the layers' own 429 with
    /// [`too_many_requests`](crate::too_many_requests).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Limiter, LimiterLayer, MemoryStore, Policy, Rule, too_many_requests};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// // Memory or Redis, as the environment says: the layer hides which.
    /// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    /// let control = layer.control();
    /// let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(900))?])?;
    /// assert!(control.check("login:alice", &policy).await?.allowed());
    /// let denied = control.check("login:alice", &policy).await?;
    /// assert_eq!(too_many_requests(&denied, &policy).status(), 429);
    /// // A key of a user's action, as `Limiter::is_action_allowed` writes it.
    /// assert!(control.is_action_allowed("alice", "export", Duration::from_secs(60), 1).await?);
    /// assert!(!control.is_action_allowed("alice", "export", Duration::from_secs(60), 1).await?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check(&self, key: &str, policy: &Policy) -> Result<Decision, Error> {
        self.check_with_cost(key, policy, policy.cost()).await
    }

    /// Checks a request of `cost` on `{prefix}:{key}` ([`Limiter::check_with_cost`](crate::Limiter::check_with_cost)).
    pub async fn check_with_cost(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        let shared = &self.context.shared;
        shared.check_key(shared.key(key), policy, cost).await
    }

    /// Whether `user` may perform `action` again, at most `max_count`
    /// times in any `period` ([`Limiter::is_action_allowed`](crate::Limiter::is_action_allowed)).
    pub async fn is_action_allowed(
        &self,
        user: &str,
        action: &str,
        period: Duration,
        max_count: u64,
    ) -> Result<bool, Error> {
        (self.context.shared)
            .is_action_allowed(user, action, period, max_count)
            .await
    }

    /// Checks a request on `{prefix}:{key}`, waiting instead of being
    /// denied while its retry time is at most `max_wait` away
    /// ([`Limiter::acquire`](crate::Limiter::acquire)), in the layer's queues.
    pub async fn acquire(
        &self,
        key: &str,
        policy: &Policy,
        max_wait: Duration,
    ) -> Result<Decision, Error> {
        let shared = &self.context.shared;
        shared.acquire_key(shared.key(key), policy, max_wait).await
    }

    /// Takes a permit of `limit` on `{prefix}:{key}` ([`Limiter::acquire_permit`](crate::Limiter::acquire_permit)).
    /// Fails with [`Error::Unsupported`] for a store that keeps no permits.
    pub async fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> Result<Acquired, Error> {
        let shared = &self.context.shared;
        shared.permit_key(shared.key(key), limit).await
    }

    /// What [`check`](Self::check) would answer now on `{prefix}:{key}`,
    /// recording nothing ([`Limiter::peek`](crate::Limiter::peek)). Fails with
    /// [`Error::Unsupported`] for a store that cannot (the regional store).
    pub async fn peek(&self, key: &str, policy: &Policy) -> Result<Decision, Error> {
        let shared = &self.context.shared;
        shared.peek_key(&shared.key(key), policy).await
    }

    /// Forgets the state of `{prefix}:{key}` under `policy`
    /// ([`Limiter::reset`](crate::Limiter::reset)). Fails with [`Error::Unsupported`] for a store
    /// that cannot (the regional store).
    pub async fn reset_key(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        let shared = &self.context.shared;
        shared.reset_key(&shared.key(key), policy).await
    }

    /// The key prefix ([`Limiter::prefix`](crate::Limiter::prefix)).
    pub fn prefix(&self) -> &str {
        self.context.shared.prefix()
    }

    /// Checks a request on `{prefix}:{key}` that counts only if its
    /// outcome says so ([`Limiter::attempt`](crate::Limiter::attempt)):
    /// recorded now, given back by [`Attempt::refund`]. A denial becomes
    /// the layers' own 429 with [`AttemptResponse::too_many_requests`]. A
    /// key names no limit, so no live override, decision counter or top
    /// offender reaches it: check a named limit with
    /// [`attempt_on`](Self::attempt_on) for those.
    pub async fn attempt(&self, key: &str, policy: &Policy) -> Result<Attempt, Error> {
        let shared = &self.context.shared;
        shared.attempt_key(shared.key(key), policy).await
    }

    /// Checks `limit` for `identity` as a request on its route would be
    /// checked, counting only if the outcome says so ([`attempt`](Self::attempt)):
    /// for a limit checked in a handler rather than on a route (the user is
    /// in the body). It takes the route's steps: the limit's and the router
    /// layer's deny and allow lists, matched against the identity (a
    /// denied identity's attempt is denied without end, and
    /// [`too_many_requests`](AttemptResponse::too_many_requests) is the lists' 403;
    /// an allowed one passes unchecked), the identity's block (a
    /// blocked identity is denied for the block's time left, and counts
    /// nothing: [`Attempt::blocked`]), a live override of the limit (its
    /// rules, shadow mode, or off: then nothing is checked and the attempt
    /// passes), the store under the failure policy, the limit's penalty,
    /// its decision counters and its top offenders; on the key its requests
    /// would use, so that [`limits`](Self::limits) and
    /// [`reset`](Self::reset) find it once `limit` is added with
    /// [`limit`](Self::limit). Fails with [`Error::Config`] when the limit
    /// does not count by `identity`'s kind (a global limit; a limit by
    /// user, and `identity` is an address...).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let per_user = LimitLayer::new(
    ///     "login-per-user",
    ///     Policy::sliding_log([Rule::new(5, Duration::from_secs(900))?])?,
    ///     KeySource::user(),
    /// );
    /// let control = LimiterLayer::new(Limiter::new(MemoryStore::new()))
    ///     .control()
    ///     .limit("POST /login", &per_user);
    /// let alice = Identity::user("alice");
    /// let attempt = control.attempt_on(&per_user, &alice).await?; // a wrong password: counts
    /// assert_eq!(control.limits(&alice).await?[0].remaining, 4);
    /// # drop(attempt);
    /// control.block(&alice, Duration::from_secs(60)).await?;
    /// let blocked = control.attempt_on(&per_user, &alice).await?;
    /// assert!(!blocked.decision().allowed());
    /// assert!(blocked.blocked().is_some_and(|left| left <= Duration::from_secs(60)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn attempt_on(
        &self,
        limit: &LimitLayer,
        identity: &Identity,
    ) -> Result<Attempt, Error> {
        attempt::attempt_on(self, limit, identity).await
    }

    /// Checks `limit` for `identity` and records the request if allowed,
    /// taking the steps [`attempt_on`](Self::attempt_on) takes: a check
    /// made in a handler or a program that counts whatever its outcome.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let exports = LimitLayer::new(
    ///     "exports",
    ///     Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?,
    ///     KeySource::user(),
    /// );
    /// let control = LimiterLayer::new(Limiter::new(MemoryStore::new())).control();
    /// let alice = Identity::user("alice");
    /// assert!(control.check_on(&exports, &alice).await?.allowed());
    /// assert!(!control.check_on(&exports, &alice).await?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check_on(
        &self,
        limit: &LimitLayer,
        identity: &Identity,
    ) -> Result<Decision, Error> {
        attempt::check_on(self, limit, identity).await
    }
}

impl Control {
    /// Blocks `identity` for `duration` on every instance sharing the
    /// store (each store, after [`merge`](Self::merge): this one's first,
    /// then each merged one's, the first failure answered), until the
    /// block ends or [`unblock`](Self::unblock). Each request it makes is
    /// answered 429 with `Retry-After` the block's remaining time and a
    /// problem of type [`BLOCKED`](crate::BLOCKED):
    ///
    /// | identity | what the block covers |
    /// |---|---|
    /// | an address ([`Identity::ip`]; an IPv6 address stands for its network, /64 by default) | every limited route of that client address, whatever the route counts by |
    /// | a user | every limit keyed by that user, and [`attempt_on`](Self::attempt_on) such a limit |
    /// | a header's value (an API key) | every limit keyed by that header's value |
    /// | a custom function's value | every limit keyed by a custom function that answers it |
    pub async fn block(&self, identity: &Identity, duration: Duration) -> Result<(), Error> {
        blocks::block(self, identity, duration).await
    }

    /// Lifts `identity`'s block on every instance sharing the store (each
    /// store, as [`block`](Self::block) sets it).
    pub async fn unblock(&self, identity: &Identity) -> Result<(), Error> {
        blocks::unblock(self, identity).await
    }

    /// How long `identity` stays blocked, as this instance knows it (its
    /// own block, not its address's): the longest in any store.
    pub fn blocked(&self, identity: &Identity) -> Option<Duration> {
        blocks::blocked(self, identity)
    }

    /// The live blocks this instance knows, in key order: at most `max`
    /// (up to [`MAX_BLOCKS_PAGE`](limiter_core::MAX_BLOCKS_PAGE)) whose
    /// keys come after `after` (the last key of the page before; `None`
    /// for the first page), from every store (a key blocked in several
    /// listed once, with its longest block). Each block's key names its
    /// identity's kind (see [`Identity`]); its origin says whether an
    /// operator or a penalty set it. Fails with [`Error::Unsupported`] for
    /// a store that keeps no blocks.
    pub fn blocks(&self, after: Option<&str>, max: usize) -> Result<Vec<ListedBlock>, Error> {
        blocks::blocks(self, after, max)
    }
}

impl Control {
    /// Puts `value` on the limit named `limit` (as its keys end, the name
    /// [`LimitState`](super::LimitState)s and `/me/limits` show:
    /// `posts-create_post`) for `duration` (1 s to a week), on every
    /// instance sharing the limit's store once this returns (on the memory
    /// store, on this instance); the compiled limit is back by itself
    /// when it ends, or at [`clear_override`](Self::clear_override).
    ///
    /// The override's rules must run the limit's algorithm (a sliding
    /// window, its length), so each key's state carries over as it does
    /// between plans: counted requests stay counted, never admitting more
    /// than the new rules allow. A request keeps the limit's cost. The
    /// override's rules have no hot-key mode: each request asks the store.
    /// [`Error::Config`] says why an override is refused, as the attribute
    /// would; [`Error::Unsupported`] names a limit this handle does not
    /// answer for, or a store that keeps no overrides (the regional store).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Override, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let per_minute = |n| Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let posts = LimitLayer::new("posts", per_minute(10), KeySource::user());
    /// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    /// let control = layer.control().limit("POST /posts", &posts);
    ///
    /// // An incident: 2 a minute for the next hour.
    /// let hour = Duration::from_secs(3600);
    /// control.set_override("posts", Override::rules(per_minute(2)), hour).await?;
    /// assert_eq!(control.overrides()[0].rules, ["2-per-60s"]);
    /// control.clear_override("posts").await?;
    /// assert!(control.overrides().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn set_override(
        &self,
        limit: &str,
        value: Override,
        duration: Duration,
    ) -> Result<(), Error> {
        overrides::set_override(self, limit, value, duration).await
    }

    /// Puts the override `written` (rules as the attribute writes them) in
    /// `mode` on `limit`: [`set_override`](Self::set_override) for text
    /// from an operator (the admin router's `PUT /overrides/{limit}`).
    pub async fn set_written_override(
        &self,
        limit: &str,
        written: &WrittenRules,
        mode: OverrideMode,
        duration: Duration,
    ) -> Result<(), Error> {
        overrides::set_written_override(self, limit, written, mode, duration).await
    }

    /// Ends `limit`'s override on every instance sharing its store: the
    /// compiled limit holds again once this returns. Ending none is no
    /// error.
    pub async fn clear_override(&self, limit: &str) -> Result<(), Error> {
        overrides::clear_override(self, limit).await
    }

    /// The overrides in force on the limits this handle answers for, as
    /// this instance knows them now (without a call), by limit name.
    pub fn overrides(&self) -> Vec<OverrideState> {
        overrides::overrides(self)
    }

    /// The names of the limits this handle answers for, as overrides name
    /// them.
    pub fn limit_names(&self) -> Vec<String> {
        overrides::limit_names(self)
    }
}

impl Control {
    /// The `n` identities the limit named `limit` denied most in the last
    /// 5 to 10 minutes, most denied first, across the instances that share
    /// the store: this instance's counts, live, added to those each other
    /// instance published (every 5 s by default, see
    /// [`LimiterLayer::publish_offenders_every`](crate::LimiterLayer::publish_offenders_every)).
    /// The answer names each instance counted and how old its counts are;
    /// when the store does not answer, it holds this instance's counts and
    /// says why the others' are missing ([`TopOffenders::unread`](super::TopOffenders::unread)).
    /// `limit` is the limit's name as keys end with it
    /// (a `#[rate_limit]` handler's `{module}-{handler}`, such as
    /// `posts-create_post`; a [`LimitLayer`](crate::LimitLayer)'s own
    /// name), among the limits of this handle and of those it merged.
    ///
    /// What counts as a denial: a request the limit answered 429 because
    /// its rate limit denied it (the store's answer, a cached denial, the
    /// fallback limiter's), its concurrency limit did, or its identity is
    /// blocked. Shadow mode's denials let the request through: not
    /// counted; neither are requests on a deny list, nor a global limit's,
    /// which have no identity. A Space-Saving sketch of 256 counters per
    /// period counts them on each instance (see
    /// [`TopDenied`](limiter_core::TopDenied)): with `N` denials counted
    /// across the instances, each count is at most `N / 256` above the
    /// truth (its `error` says how much; an instance that does not list an
    /// identity adds the most it may have counted of it) and every identity
    /// denied more than `N / 256` times on one instance is listed; at most
    /// [`TopDenied::MAX_BYTES`](limiter_core::TopDenied::MAX_BYTES) per
    /// limit, allocated at its first denial. An instance publishes its 100
    /// highest counts of each limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let replies = LimitLayer::new(
    ///     "replies",
    ///     Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?,
    ///     KeySource::user(),
    /// );
    /// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    /// let control = layer.control().limit("POST /replies", &replies);
    /// // Nobody was denied yet; this instance is the only one counting.
    /// let top = control.top_denied("replies", 10).await?;
    /// assert!(top.offenders.is_empty());
    /// assert_eq!(top.instances.len(), 1);
    /// assert!(control.top_denied("posts", 10).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn top_denied(&self, limit: &str, n: usize) -> Result<TopOffenders, UnknownLimit> {
        offenders::top_denied(self, limit, n).await
    }

    /// This instance's name ([`instance_id`](Self::instance_id)).
    pub fn instance(&self) -> &str {
        offenders::instance(self)
    }
}

impl Control {
    /// The admin routes, to mount behind the application's own
    /// authentication (its path, its auth layer; an address is never a
    /// credential). Each names an identity by its kind, so that no value
    /// of one kind reaches another's state:
    ///
    /// | kind | identity | example |
    /// |---|---|---|
    /// | `ip` | a client address, or a network (`2001:db8:1:2::/64`, its `/` encoded as `%2F`) | `/blocks/ip/203.0.113.7` |
    /// | `user` | a user | `/blocks/user/alice` |
    /// | `key` | the value of the API key header ([`api_key_header`](Self::api_key_header), `x-api-key` by default) | `/limits/key/k-123` |
    /// | `custom` | what a custom key function answers | `/limits/custom/tenant-7` |
    ///
    /// The identity is percent-decoded to bytes, so one that is not UTF-8
    /// (a raw header value) is named too (`/limits/key/caf%E9`).
    ///
    /// | route | answer |
    /// |---|---|
    /// | `GET /limits/{kind}/{identity}` | 200, a JSON array of [`LimitState`](super::LimitState)s ([`limits`](Self::limits)) |
    /// | `DELETE /limits/{kind}/{identity}` | 204 once every limit of the identity is reset ([`reset`](Self::reset)) |
    /// | `GET /limits` | 200, a JSON array of [`LimitInfo`](super::LimitInfo)s: every limit by the name overrides and top offenders take, with its route, kind, algorithm, rules in force and compiled, and the override in force with its seconds left ([`limit_list`](Self::limit_list)) |
    /// | `GET /blocks?after={key}&limit={n}` | 200 `{"blocks": [{"key", "seconds", "origin"}...], "next": key or null}`: the live blocks this instance knows in key order, `limit` (1 to 1,000, default 100) a page, from after `after` (the `next` of the page before) ([`blocks`](Self::blocks)) |
    /// | `GET /blocks/{kind}/{identity}` | 200 `{"seconds": N}`, the block's time left rounded up, or 404 when not blocked ([`blocked`](Self::blocked)) |
    /// | `PUT /blocks/{kind}/{identity}` | body `{"seconds": N}` (1 to 31,536,000): 204 once blocked on every instance ([`block`](Self::block)); 400 for another body; 507 when the store holds [`MAX_BLOCKS`](limiter_core::MAX_BLOCKS) operator blocks already |
    /// | `DELETE /blocks/{kind}/{identity}` | 204 once unblocked ([`unblock`](Self::unblock)) |
    /// | `GET /overrides` | 200, a JSON array of [`OverrideState`](super::OverrideState)s, the overrides in force ([`overrides`](Self::overrides)) |
    /// | `GET /overrides/{limit}` | 200, the limit's [`OverrideState`](super::OverrideState), or 404 when none holds |
    /// | `PUT /overrides/{limit}` | body `{"rules": [[2, "60s"]], "seconds": 3600}` (or `"rate": [10, "1s"], "burst": 20` for a bucket or GCRA; `"mode": "shadow"` tries the rules, or the limit's own, without denying; `"mode": "off"` switches the limit off; `seconds` 1 to 604,800): 204 once every instance holds it ([`set_override`](Self::set_override)); 400 with the attribute's own message for rules it would refuse; 404 for a limit this handle does not answer for |
    /// | `DELETE /overrides/{limit}` | 204 once the compiled limit holds again everywhere ([`clear_override`](Self::clear_override)) |
    /// | `GET /top/{limit}?n={n}` | 200, the `n` (1 to 100, default 10) identities the limit named `limit` (as keys end with it: `posts-create_post`) denied most in the last 5 to 10 minutes across the instances sharing the store, most denied first, and each instance counted with its counts' age: `{"offenders": [{"kind", "identity", "denied", "error"}...], "instances": [{"instance", "age_ms"}...]}` ([`TopOffenders`](super::TopOffenders), [`top_denied`](Self::top_denied)); the header `limiter-instance` names the instance that answered ([`instance_id`](Self::instance_id)); 404 for an unknown limit |
    ///
    /// An unknown kind is 404, an address that does not parse 400, a query
    /// the route does not take 400. A store
    /// that cannot answer gives 503 (problem+json), one that cannot peek or
    /// reset (the regional store) 501. A change answered 503 whose detail
    /// says it was not confirmed ([`Error::Unconfirmed`]) may still have
    /// been made: it is then in effect on every instance, or on none,
    /// within 2 s of the store answering again; repeat the call (each is
    /// idempotent).
    ///
    /// ```
    /// # use limiter_tower::{Limiter, LimiterLayer, MemoryStore};
    /// # let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    /// let admin: axum::Router = axum::Router::new().nest("/admin", layer.control().router());
    /// // .layer(your_authentication) on `admin` before merging it into the app
    /// ```
    pub fn router<S>(&self) -> Router<S> {
        router::router(self)
    }
}

impl Control {
    /// Every limit this handle answers for (and those it merged), by name:
    /// the names overrides and top offenders take, with the kind each
    /// counts by, its route, and the rules in force (a live override's,
    /// with its end, while one holds), as this instance knows them now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Override, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let replies = LimitLayer::new(
    ///     "replies",
    ///     Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?,
    ///     KeySource::user(),
    /// );
    /// let control = LimiterLayer::new(Limiter::new(MemoryStore::new()))
    ///     .control()
    ///     .limit("POST /replies", &replies);
    /// let tighter = Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?;
    /// control
    ///     .set_override("replies", Override::rules(tighter), Duration::from_secs(120))
    ///     .await?;
    /// let listed = control.limit_list();
    /// assert_eq!(listed[0].name, "replies");
    /// assert_eq!(listed[0].kind, "user");
    /// assert_eq!(listed[0].rules, ["1-per-60s"]);
    /// assert_eq!(listed[0].compiled, ["5-per-60s"]);
    /// assert_eq!(listed[0].overridden.as_ref().map(|o| o.seconds), Some(120));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn limit_list(&self) -> Vec<LimitInfo> {
        state::limit_list(self)
    }
}
