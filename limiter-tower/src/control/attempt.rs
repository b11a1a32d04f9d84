//! Counting by outcome in a handler: a request checked through the
//! layer's store, given back when its outcome says it does not count.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use limiter_core::{Decision, Error, Identity, Policy, Receipt, required};

use super::Control;
use crate::context::{COUNTING, DynStore};
use crate::limit::LimitLayer;

/// A request checked by [`Control::attempt`]: it counts unless it is
/// [refunded](Self::refund); dropped without a refund, it stays counted.
#[must_use = "an attempt counts unless it is refunded"]
pub struct Attempt {
    store: Arc<dyn DynStore>,
    key: String,
    policy: Arc<Policy>,
    decision: Decision,
    receipt: Option<Receipt>,
    blocked: Option<Duration>,
}

impl Control {
    /// Checks a request on `{prefix}:{key}` against `policy` that counts
    /// only if its outcome says so, through the layer's store: recorded
    /// now, so concurrent attempts count while in flight and no more pass
    /// than `policy` allows, and given back by [`Attempt::refund`] (the
    /// login succeeded). A denial becomes the layers' own 429 with
    /// [`too_many_requests`](crate::too_many_requests). `key` is used as
    /// given: build it with [`Identity::push_key`] and `:{action}`, so that
    /// a block of that identity denies the attempt (the identity is the
    /// key up to its first `:`).
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
        let mut full = String::from(&*self.key_start);
        full.push_str(key);
        let blocked = self.block_of_key(&full);
        self.attempt_on_key(full, policy, blocked).await
    }

    /// [`attempt`](Self::attempt) on `limit`'s key for `identity`, under
    /// its policy: the key its requests would use, so that
    /// [`limits`](Self::limits) and [`reset`](Self::reset) find it once
    /// `limit` is added with [`limit`](Self::limit). For a limit checked in
    /// a handler rather than on a route. A blocked identity's attempt is
    /// denied for the block's time left, and counts nothing
    /// ([`Attempt::blocked`]). Fails with [`Error::Config`] when the limit
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
        let limit = &limit.limit;
        let Some(key) = self.key_of(limit, identity) else {
            return Err(Error::Config(limiter_core::ConfigError::NoIdentity {
                limit: limit.name.to_string(),
            }));
        };
        let blocked = self.blocked(identity);
        let policy = Arc::clone(&limit.policy);
        self.attempt_on_key(key, &policy, blocked).await
    }

    async fn attempt_on_key(
        &self,
        full: String,
        policy: &Policy,
        blocked: Option<Duration>,
    ) -> Result<Attempt, Error> {
        let (decision, receipt) = match blocked {
            Some(left) => (Decision::blocked(policy, left), None),
            None => {
                let refunds = required(self.store.capabilities().as_refunds(), COUNTING)?;
                let (verdict, receipt) = refunds
                    .check_refundable_or(&full, policy, policy.cost(), None)
                    .await?;
                (verdict.into_decision(policy)?, receipt)
            }
        };
        Ok(Attempt {
            store: Arc::clone(&self.store),
            key: full,
            policy: Arc::new(policy.clone()),
            decision,
            receipt,
            blocked,
        })
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
    /// blocked, else [`too_many_requests`](crate::too_many_requests).
    pub fn too_many_requests(&self) -> Response {
        match self.blocked {
            Some(left) => crate::response::blocked(crate::response::Protocol::Http, left),
            None => crate::too_many_requests(&self.decision, &self.policy),
        }
    }

    /// Gives the request back: it no longer counts. Does nothing for a
    /// request that was not recorded (denied, or decided without the store).
    pub async fn refund(self) -> Result<(), Error> {
        match &self.receipt {
            Some(receipt) => {
                required(self.store.capabilities().as_refunds(), COUNTING)?
                    .refund(&self.key, &self.policy, receipt)
                    .await
            }
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("key", &self.key)
            .field("decision", &self.decision)
            .field("receipt", &self.receipt)
            .finish_non_exhaustive()
    }
}
