//! The setters of [`LimitLayer`] that make a limit follow the business
//! and that the router layer does not have: plans, costs, a concurrency
//! limit, which requests wait. (Allow lists, shadow mode and waiting are
//! the common setters, in `limit/mod.rs`.)

use std::sync::Arc;

use http::request::Parts;
use limiter_core::{ConcurrencyLimit, ConfigError, Penalty, Plan, Policy, Rule};

use crate::LimitLayer;
use crate::key::KeySource;
use crate::limit::RouteLimit;
use crate::options::{Concurrency, RouteOptions};

impl LimitLayer {
    /// A limit named `name` with no rate limit, only at most `limit.max()`
    /// requests of one `source` identity in flight at once across every
    /// instance sharing the store. See [`concurrency`](Self::concurrency).
    ///
    /// ```
    /// use axum::{Router, routing::post};
    /// use limiter_tower::{ConcurrencyLimit, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore};
    ///
    /// let exports = LimitLayer::concurrent("exports", ConcurrencyLimit::new(2)?, KeySource::user());
    /// let app: Router = Router::new()
    ///     .route("/exports", post(|| async { "exported" }).layer(exports))
    ///     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())).user(|parts| {
    ///         parts.headers.get("x-user-id")?.to_str().ok().map(str::to_owned)
    ///     }));
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    pub fn concurrent(name: impl AsRef<str>, limit: ConcurrencyLimit, source: KeySource) -> Self {
        // The rate policy is never checked: one in the limit's shape.
        let unused = Rule::new(limit.max(), limit.lease()).expect("a concurrency limit's quota");
        let mut layer = Self {
            limit: Arc::new(RouteLimit::new(
                name.as_ref(),
                Policy::fixed_window(unused),
                source,
            )),
        };
        let options = layer.options();
        options.rate = false;
        options.concurrency = Some(Concurrency::new(limit));
        layer
    }

    fn options(&mut self) -> &mut RouteOptions {
        Arc::make_mut(&mut self.limit)
            .options
            .get_or_insert_default()
    }

    /// At most `limit.max()` requests of one identity in flight at once,
    /// besides the rate limit, across every instance sharing the store.
    ///
    /// A request takes a permit before its rate is checked, and holds it
    /// until its response body has been sent or dropped (the client went
    /// away); a request whose future is dropped gives it back at once. On
    /// Redis a permit is a lease renewed while it is held, so the permits of
    /// an instance that dies are given back when their lease ends. Without
    /// a free permit the request is answered 429 with `Retry-After: 1`,
    /// its `RateLimit-Policy` item carrying `qu="concurrent-requests"`:
    /// `"2-concurrent";q=2;qu="concurrent-requests"`. The permits' keys
    /// are the limit's keys followed by `:concurrent`.
    pub fn concurrency(mut self, limit: ConcurrencyLimit) -> Self {
        self.options().concurrency = Some(Concurrency::new(limit));
        self
    }

    /// Takes the policy of each request from its plan: `resolve` reads the
    /// request's head and answers its [`Plan`] (typically the plan of its
    /// API key, looked up in a [`Plans`](crate::Plans) that an admin
    /// endpoint changes while the service runs), or `None` for the limit's
    /// own policy. An [unlimited](Plan::unlimited) plan's requests are not
    /// checked.
    ///
    /// The key stays the limit's (`{prefix}:{identity}:{name}`), so a key's
    /// state carries over when its plan changes: lowering a plan's limit
    /// admits nothing more in the current window than the new limit allows
    /// (see [`Plans`](crate::Plans)). The RateLimit items are named after
    /// the plan: `"pro:100-per-60s"`. A plan whose policy runs another
    /// algorithm than the limit's own is not applied (the limit's own
    /// policy is, and the mistake is logged at `error`): check the set with
    /// [`Plans::fits`](crate::Plans::fits).
    ///
    /// ```
    /// use std::time::Duration;
    /// use axum::{Router, routing::get};
    /// use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Plan, Plans, Policy, Rule};
    ///
    /// let per_minute = |n| Policy::sliding_log([Rule::new(n, Duration::from_secs(60))?]);
    /// let plans = Plans::new([Plan::new("free", per_minute(10)?)?, Plan::new("pro", per_minute(100)?)?])?;
    /// let default = per_minute(10)?;
    /// plans.fits(&default)?;
    /// let handle = plans.clone(); // for the admin endpoint: `handle.insert(..)`
    /// let search = LimitLayer::new("search", default, KeySource::header("x-api-key".parse()?))
    ///     .plans(move |parts| {
    ///         let key = parts.headers.get("x-api-key")?.to_str().ok()?;
    ///         plans.get(if key.starts_with("pro-") { "pro" } else { "free" })
    ///     });
    /// let app: Router = Router::new()
    ///     .route("/search", get(|| async { "results" }).layer(search))
    ///     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plans(
        mut self,
        resolve: impl Fn(&Parts) -> Option<Plan> + Send + Sync + 'static,
    ) -> Self {
        self.options().plans = Some(Arc::new(resolve));
        self
    }

    /// What each request costs, read from its head (a batch's size, say),
    /// instead of the policy's cost. A cost of 0 is not checked nor counted;
    /// a cost the policy could never allow (above its smallest limit, its
    /// capacity or its burst) is answered 429 without `Retry-After`, since
    /// retrying cannot help.
    ///
    /// ```
    /// use limiter_tower::{KeySource, LimitLayer, Policy, Rate};
    ///
    /// let bucket = Policy::token_bucket(Rate::per_second(10)?, 100)?;
    /// let imports = LimitLayer::new("imports", bucket, KeySource::ip()).cost(|parts| {
    ///     let items = parts.headers.get("x-batch-size").and_then(|v| v.to_str().ok());
    ///     items.and_then(|n| n.parse().ok()).unwrap_or(1)
    /// });
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.options().cost = Some(Arc::new(cost));
        self
    }

    /// Denials earn blocks: after [`penalty.after()`](Penalty::after)
    /// denials of an identity by this limit within its period, the identity
    /// is blocked (see [`Control::block`](crate::Control::block)) for the
    /// penalty's first block, then longer on repeat offences. Each denial is
    /// counted in the store (one call), so the limit's denials are awaited,
    /// not answered at once; once blocked, the identity's requests are
    /// answered without a call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{KeySource, LimitLayer, Penalty, Policy, Rule};
    ///
    /// let minute = Duration::from_secs(60);
    /// let replies = LimitLayer::new(
    ///     "replies",
    ///     Policy::sliding_log([Rule::new(5, minute)?])?,
    ///     KeySource::user(),
    /// )
    /// .penalty(Penalty::new(3, 10 * minute, [15 * minute, 60 * minute])?);
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    pub fn penalty(mut self, penalty: Penalty) -> Self {
        self.options().penalty = Some(Arc::new(penalty));
        self
    }

    /// Counts only the requests whose response `counts` says count (given
    /// the response's status and headers): each request is recorded when
    /// it is admitted, so concurrent requests count while in flight and no
    /// more pass than the policy allows, and is given back once its
    /// response says it does not count. A request whose response never
    /// comes (dropped, timed out) stays counted. A response limiter made
    /// itself (another limit's 429, as [`AttemptResponse::too_many_requests`](crate::AttemptResponse::too_many_requests)
    /// answers in a handler; a block's 429; a deny list's 403; limiter's own
    /// 503) never counts, whatever `counts` says: the handler decided no
    /// outcome. See [`count_failures`](Self::count_failures) for the common
    /// case.
    ///
    /// Fails for a policy whose algorithm cannot give a request back
    /// exactly (the buckets and GCRA; see [`limiter_core::refund`]), and
    /// for a concurrency limit alone.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{KeySource, LimitLayer, Policy, Rule};
    ///
    /// // A 409 (already taken) does not use up the quota of sign-ups.
    /// let signups = LimitLayer::new(
    ///     "signups",
    ///     Policy::sliding_log([Rule::new(3, Duration::from_secs(3600))?])?,
    ///     KeySource::ip(),
    /// )
    /// .count_when(|status, _headers| status != http::StatusCode::CONFLICT)?;
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    pub fn count_when(
        mut self,
        counts: impl Fn(http::StatusCode, &http::HeaderMap) -> bool + Send + Sync + 'static,
    ) -> Result<Self, ConfigError> {
        if !self.options().rate {
            return Err(ConfigError::NotRefundable {
                algorithm: "a concurrency limit alone",
            });
        }
        self.limit.policy().counts_by_outcome()?;
        self.options().count_when = Some(Arc::new(counts));
        Ok(self)
    }

    /// Counts only failed requests, those answered with a status of 400 or
    /// more (express-rate-limit's `skipSuccessfulRequests`): a login limit
    /// that a user who types the right password never reaches.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{KeySource, LimitLayer, Policy, Rule};
    ///
    /// let failed_logins = LimitLayer::new(
    ///     "failed-logins",
    ///     Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?,
    ///     KeySource::ip(),
    /// )
    /// .count_failures()?;
    /// # Ok::<(), limiter_tower::ConfigError>(())
    /// ```
    pub fn count_failures(self) -> Result<Self, ConfigError> {
        self.count_when(crate::__private::counts_failures)
    }

    /// Waits ([`wait`](Self::wait)) only for the requests `when` answers
    /// `true` for; the others are answered 429 at once.
    pub fn wait_when(mut self, when: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.options().wait_when = Some(Arc::new(when));
        self
    }
}
