//! Checks made in a handler: a limit's check of an identity, decided as
//! its route decides a request, and counting by outcome (given back when
//! the outcome says it does not count).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use limiter_core::{ConfigError, Decision, Error, Identity, Policy, Receipt, required};

use super::Control;
use crate::context::{COUNTING, DynStore};
use crate::limit::{Checked, LimitLayer, Refund, RouteLimit};

/// A request checked by [`Control::attempt`] or [`Control::attempt_on`]:
/// it counts unless it is [refunded](Self::refund); dropped without a
/// refund, it stays counted.
#[must_use = "an attempt counts unless it is refunded"]
pub struct Attempt {
    decision: Decision,
    policy: Arc<Policy>,
    blocked: Option<Duration>,
    deny_listed: bool,
    give_back: Option<GiveBack>,
}

/// What gives an attempt back.
enum GiveBack {
    /// A limit's check, as its route would give it back.
    Limit(Box<Refund>),
    /// A check on a key of the caller's.
    Key {
        store: Arc<dyn DynStore>,
        key: String,
        receipt: Receipt,
    },
}

impl Control {
    /// Checks a request on `{prefix}:{key}` against `policy` that counts
    /// only if its outcome says so, through the layer's store: recorded
    /// now, so concurrent attempts count while in flight and no more pass
    /// than `policy` allows, and given back by [`Attempt::refund`] (the
    /// login succeeded). A denial becomes the layers' own 429 with
    /// [`Attempt::too_many_requests`]. `key` is used as given: build it
    /// with [`Identity::push_key`] and `:{action}`, so that a block of that
    /// identity denies the attempt (the identity is the key up to its
    /// first `:`). A key names no limit, so no live override, decision
    /// counter or top offender reaches it: check a named limit with
    /// [`attempt_on`](Self::attempt_on) for those.
    ///
    /// Fails with [`Error::Config`] for a policy whose algorithm cannot
    /// give a request back exactly (the buckets and GCRA).
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Limiter, MemoryStore, Policy, RateLimitLayer, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let control = RateLimitLayer::new(Limiter::new(MemoryStore::new())).control();
    /// // 5 failed logins per user in 15 minutes; successes never count.
    /// let failures = Policy::sliding_log([Rule::new(5, Duration::from_secs(900))?])?;
    /// for _ in 0..20 {
    ///     let attempt = control.attempt("login:alice", &failures).await?;
    ///     assert!(attempt.decision().allowed());
    ///     attempt.refund().await?; // the password was right
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn attempt(&self, key: &str, policy: &Policy) -> Result<Attempt, Error> {
        let mut full = String::from(&*self.context.key_start);
        full.push_str(key);
        let policy = Arc::new(policy.clone());
        if let Some(left) = self.block_of_key(&full) {
            return Ok(Attempt {
                decision: Decision::blocked(&policy, left),
                policy,
                blocked: Some(left),
                deny_listed: false,
                give_back: None,
            });
        }
        let refunds = required(self.context.store.capabilities().as_key_state(), COUNTING)?;
        let (decision, receipt) = refunds
            .check_refundable(&full, &policy, policy.cost())
            .await?;
        Ok(Attempt {
            decision,
            policy,
            blocked: None,
            deny_listed: false,
            give_back: receipt.map(|receipt| GiveBack::Key {
                store: Arc::clone(&self.context.store),
                key: full,
                receipt,
            }),
        })
    }

    /// Checks `limit` for `identity` as a request on its route would be
    /// checked, counting only if the outcome says so ([`attempt`](Self::attempt)):
    /// for a limit checked in a handler rather than on a route (the user is
    /// in the body). It takes the route's steps: the limit's and the router
    /// layer's deny and allow lists, matched against the identity (a
    /// denied identity's attempt is denied without end, and
    /// [`too_many_requests`](Attempt::too_many_requests) is the lists' 403;
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
    /// use limiter_tower::{Identity, KeySource, Limiter, LimitLayer, MemoryStore, Policy, RateLimitLayer, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let per_user = LimitLayer::new(
    ///     "login-per-user",
    ///     Policy::sliding_log([Rule::new(5, Duration::from_secs(900))?])?,
    ///     KeySource::user(),
    /// );
    /// let control = RateLimitLayer::new(Limiter::new(MemoryStore::new()))
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
        let checked = self.check_limit(&limit.limit, identity, true).await?;
        Ok(Attempt {
            decision: checked.decision,
            policy: checked.policy,
            blocked: checked.blocked,
            deny_listed: checked.deny_listed,
            give_back: checked.refund.map(GiveBack::Limit),
        })
    }

    /// Checks `limit` for `identity` and records the request if allowed,
    /// taking the steps [`attempt_on`](Self::attempt_on) takes: a check
    /// made in a handler or a program that counts whatever its outcome.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Identity, KeySource, Limiter, LimitLayer, MemoryStore, Policy, RateLimitLayer, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let exports = LimitLayer::new(
    ///     "exports",
    ///     Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?,
    ///     KeySource::user(),
    /// );
    /// let control = RateLimitLayer::new(Limiter::new(MemoryStore::new())).control();
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
        let checked = self.check_limit(&limit.limit, identity, false).await?;
        Ok(checked.decision)
    }

    /// `limit`'s check of `identity`, under the limit's own settings or
    /// this handle's router layer's, as its route decides a request.
    async fn check_limit(
        &self,
        limit: &RouteLimit,
        identity: &Identity,
        refundable: bool,
    ) -> Result<Checked, Error> {
        let Some(key) = self.key_of(limit, identity) else {
            return Err(Error::Config(ConfigError::NoIdentity {
                limit: limit.name.to_string(),
            }));
        };
        let context = limit.context.as_ref().unwrap_or(&self.context);
        let block_key = self.identity_key(identity);
        limit
            .check_identity(context, key, identity, block_key, refundable)
            .await
    }
}

impl Attempt {
    /// The check's decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The block's time left when the identity is blocked: the attempt was
    /// denied without a check.
    pub fn blocked(&self) -> Option<Duration> {
        self.blocked
    }

    /// The layers' own 429 for a denied attempt: the blocked answer (a
    /// problem of type [`BLOCKED`](crate::BLOCKED)) when the identity is
    /// blocked, else [`too_many_requests`](crate::too_many_requests) naming
    /// the policy in force (a live override's rules while one holds). A
    /// limit above the handler that counts by outcome never counts it as
    /// the handler's failure.
    pub fn too_many_requests(&self) -> Response {
        let http = crate::response::Protocol::Http;
        match self.blocked {
            _ if self.deny_listed => crate::response::deny_listed(http),
            Some(left) => crate::response::blocked(http, left),
            None => crate::too_many_requests(&self.decision, &self.policy),
        }
    }

    /// Gives the request back: it no longer counts. Does nothing for a
    /// request that was not recorded (denied, or decided without the store).
    pub async fn refund(self) -> Result<(), Error> {
        match &self.give_back {
            Some(GiveBack::Limit(refund)) => refund.give_back().await,
            Some(GiveBack::Key {
                store,
                key,
                receipt,
            }) => {
                required(store.capabilities().as_key_state(), COUNTING)?
                    .refund(key, &self.policy, receipt)
                    .await
            }
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("decision", &self.decision)
            .field("blocked", &self.blocked)
            .field("refundable", &self.give_back.is_some())
            .finish_non_exhaustive()
    }
}
