//! The store's part of a request's admission when the store does not
//! decide at once, owned so it runs in the limit's future: the permit
//! first, then the rate, each waiting in turn when the limit waits.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use limiter_core::{
    Acquired, ConcurrencyLimit, Decision, Error, Identity, OnStoreError, Override, OverrideMode,
    Penalty, Policy, Verdict, Waiters, required,
};

use super::counters::Counted;
use super::detached::Detached;
use super::refund::Refund;
use super::route::RouteLimit;
use crate::business::CountWhen;
use crate::context::{self as layer, BoxFuture, COUNTING, DynStore};

/// What the store answered a request: the permit (when the limit has a
/// concurrency limit) and the rate limit's verdict (unless the request is
/// not rate limited, or its permit was refused).
#[derive(Default)]
pub(crate) struct Admission {
    pub(crate) permit: Option<Result<Acquired, Error>>,
    pub(crate) verdict: Option<Result<Verdict, Error>>,
    /// What gives the request back, when the limit counts by outcome and
    /// the store recorded it.
    pub(crate) refund: Option<Box<Refund>>,
    /// The request's key, given back by the checks (a denial counts the
    /// identity it names).
    pub(crate) key: String,
}

impl Admission {
    /// The answer of a rate check alone, and its key.
    #[inline]
    pub(crate) fn rate((verdict, key): (Result<Verdict, Error>, String)) -> Self {
        Self {
            permit: None,
            verdict: Some(verdict),
            refund: None,
            key,
        }
    }
}

/// What one request's checks need, owned so they can outlive `call`.
pub(crate) struct Checks {
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) key: String,
    pub(crate) rate: Option<(Arc<Policy>, u64)>,
    pub(crate) concurrency: Option<ConcurrencyLimit>,
    pub(crate) on_error: Option<OnStoreError>,
    pub(crate) waiters: Option<(Waiters, Duration)>,
    pub(crate) shadow: bool,
    /// A penalty counting this limit's denials, and the identity's block key.
    pub(crate) penalty: Option<(Arc<Penalty>, String)>,
    /// Requests count only when their response says so.
    pub(crate) count_when: Option<CountWhen>,
}

/// An admission under way.
pub(crate) enum Pending {
    /// A rate check alone: the store's own future, not boxed again.
    Rate(BoxFuture<(Result<Verdict, Error>, String)>),
    /// A permit, or waiting: the steps in one future.
    Steps(BoxFuture<Admission>),
}

impl Pending {
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Admission> {
        match self {
            Self::Rate(check) => check.as_mut().poll(cx).map(Admission::rate),
            Self::Steps(steps) => steps.as_mut().poll(cx),
        }
    }
}

/// A check of a limit made without a request (in a handler, through
/// [`Control`](crate::Control)), as the limit decided it.
pub(crate) struct Checked {
    pub(crate) decision: Decision,
    /// The policy in force: a live override's, or the limit's own.
    pub(crate) policy: Arc<Policy>,
    /// The block's time left, when the identity is blocked.
    pub(crate) blocked: Option<Duration>,
    /// Whether a deny list refused the identity.
    pub(crate) deny_listed: bool,
    /// What gives the check back, when it was asked for and recorded.
    pub(crate) refund: Option<Box<Refund>>,
}

impl RouteLimit {
    /// Decides a check of `identity` (under `key`, its block under
    /// `block_key`) made without a request, taking the steps a request on
    /// the limit's route takes: deny and allow lists, the identity's block,
    /// the policy in force
    /// (a live override, else the limit's own), the store under the
    /// failure policy, the penalty, the decision counters, the top
    /// offenders and shadow mode. `refundable`: recorded so that it can be
    /// given back ([`Checked::refund`]).
    pub(crate) async fn check_identity(
        &self,
        context: &layer::Context,
        key: String,
        identity: &Identity,
        block_key: String,
        refundable: bool,
    ) -> Result<Checked, Error> {
        let unchecked = |policy: Arc<Policy>, blocked| Checked {
            decision: match blocked {
                Some(left) => Decision::blocked(&policy, left),
                None => Decision::unchecked(&policy),
            },
            policy,
            blocked,
            deny_listed: false,
            refund: None,
        };
        if self.lists_identity(context, identity, |common| &common.deny) {
            self.record(Counted::DenyListed);
            let policy = Arc::clone(&self.policy);
            return Ok(Checked {
                decision: Decision::blocked(&policy, Duration::MAX),
                deny_listed: true,
                ..unchecked(policy, None)
            });
        }
        if self.lists_identity(context, identity, |common| &common.allow) {
            self.record(Counted::Bypassed);
            return Ok(unchecked(Arc::clone(&self.policy), None));
        }
        let blocks = context.store.capabilities().as_blocks();
        if self.honours_blocks
            && let Some(left) = blocks.and_then(|blocks| blocks.blocked(&block_key))
        {
            self.record(Counted::Blocked);
            self.record_denial_of(identity);
            return Ok(unchecked(Arc::clone(&self.policy), Some(left)));
        }
        let overridden = self.override_of(context);
        let mode = overridden.as_deref().map(Override::mode);
        if mode == Some(OverrideMode::Off) {
            self.record_as(Counted::OverrideOff, true);
            return Ok(unchecked(Arc::clone(&self.policy), None));
        }
        let policy = match overridden.as_deref().and_then(Override::shared_policy) {
            Some(policy) => Arc::clone(policy),
            None => Arc::clone(&self.policy),
        };
        let shadow = self.in_shadow(context, mode);
        let penalty = self.business.as_deref().and_then(|b| b.penalty.clone());
        let counts: Option<CountWhen> = refundable
            .then(|| Arc::new(|_: http::StatusCode, _: &http::HeaderMap| true) as CountWhen);
        let mut pending = admit(Checks {
            store: Arc::clone(&context.store),
            key,
            rate: Some((Arc::clone(&policy), policy.cost())),
            concurrency: None,
            on_error: self.on_store_error.or(context.on_store_error),
            waiters: None,
            shadow,
            penalty: penalty.map(|penalty| (penalty, block_key)),
            count_when: counts,
        });
        let admission = std::future::poll_fn(|cx| pending.poll(cx)).await;
        let overridden = overridden.is_some();
        let verdict = match admission.verdict {
            Some(Ok(verdict)) => verdict,
            Some(Err(error)) => {
                self.record_as(Counted::Error, overridden);
                // Shadow mode lets a failure through, as on the route.
                return match shadow {
                    true => Ok(unchecked(policy, None)),
                    false => Err(error),
                };
            }
            None => return Ok(unchecked(policy, None)),
        };
        self.record_as(Counted::of(&verdict), overridden);
        let mut decision = match verdict.into_decision(&policy) {
            Ok(decision) => decision,
            Err(_) if shadow => Decision::unchecked(&policy),
            Err(failed_closed) => return Err(failed_closed),
        };
        if !decision.allowed() {
            if shadow {
                self.shadow_counter
                    .record(self.policy.algorithm().name(), &self.name);
                decision = Decision::unchecked(&policy);
            } else {
                self.record_denial_of(identity);
            }
        }
        Ok(Checked {
            decision,
            policy,
            blocked: None,
            deny_listed: false,
            refund: admission.refund,
        })
    }
}

/// Takes the permit, then checks the rate (unless the permit was refused
/// and the limit enforces it), each waiting in turn when the limit waits.
/// Dropping the future gives back a permit taken and leaves any queue.
pub(crate) fn admit(checks: Checks) -> Pending {
    if let Checks {
        store,
        key,
        rate: Some((policy, cost)),
        concurrency: None,
        on_error,
        waiters: None,
        penalty: None,
        count_when: None,
        ..
    } = checks
    {
        return Pending::Rate(store.check_owned(key, policy, cost, on_error));
    }
    Pending::Steps(Box::pin(steps(checks)))
}

async fn steps(checks: Checks) -> Admission {
    let Checks {
        store,
        key,
        rate,
        concurrency,
        on_error,
        waiters,
        shadow,
        penalty,
        count_when,
    } = checks;
    let mut admission = Admission::default();
    if let Some(limit) = concurrency {
        let permit_key = format!("{key}:concurrent");
        let acquire =
            || Arc::clone(&store).acquire_permit_owned(permit_key.clone(), limit, on_error);
        let acquired = match &waiters {
            Some((waiters, max)) => waiters.acquire(&permit_key, *max, acquire).await,
            None => acquire().await,
        };
        let proceed = shadow || matches!(acquired, Ok(Acquired::Permit(_)));
        admission.permit = Some(acquired);
        if !proceed {
            admission.key = key;
            return admission;
        }
    }
    if let Some((policy, cost)) = rate {
        match count_when {
            None => {
                let check = || {
                    let check = Arc::clone(&store).check_owned(
                        key.clone(),
                        Arc::clone(&policy),
                        cost,
                        on_error,
                    );
                    async move { check.await.0 }
                };
                admission.verdict = Some(match &waiters {
                    Some((waiters, max)) => waiters.acquire(&key, *max, check).await,
                    None => check().await,
                });
            }
            Some(counts) => {
                let checked = match required(store.capabilities().as_refunds(), COUNTING) {
                    Ok(refunds) => {
                        let check = || refunds.check_refundable_or(&key, &policy, cost, on_error);
                        match &waiters {
                            Some((waiters, max)) => waiters.acquire(&key, *max, check).await,
                            None => check().await,
                        }
                    }
                    Err(unsupported) => Err(unsupported),
                };
                admission.verdict = Some(checked.map(|(verdict, receipt)| {
                    admission.refund = receipt.map(|receipt| {
                        Box::new(Refund {
                            store: Arc::clone(&store),
                            key: key.clone(),
                            policy: Arc::clone(&policy),
                            receipt,
                            counts,
                        })
                    });
                    verdict
                }));
            }
        }
    }
    if let (Some((penalty, block_key)), Some(Ok(verdict))) = (penalty, &admission.verdict) {
        let denied = verdict.decision().is_some_and(|d| !d.allowed());
        if denied && !shadow {
            // Detached: a penalty counted is a block applied, even when the
            // request goes away meanwhile.
            let penalized = penalize(store, key.clone(), penalty, block_key);
            Detached::run(Box::pin(penalized)).await;
        }
    }
    admission.key = key;
    admission
}

/// Counts a denial of `key` by `penalty`, and blocks `block_key` when it
/// earns a block. A store that fails here leaves the denial as it is.
async fn penalize(store: Arc<dyn DynStore>, key: String, penalty: Arc<Penalty>, block_key: String) {
    let capabilities = store.capabilities();
    let counted = match required(capabilities.as_penalties(), "penalties") {
        Ok(penalties) => {
            penalties
                .penalize_for(&format!("{key}:penalty"), &penalty, &block_key)
                .await
        }
        Err(unsupported) => Err(unsupported),
    };
    let blocked = match counted {
        Ok(Some(block)) => {
            let origin = limiter_core::BlockOrigin::Penalty;
            match required(capabilities.as_blocks(), "blocks") {
                Ok(blocks) => blocks.block(&block_key, block, origin).await,
                Err(unsupported) => Err(unsupported),
            }
        }
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    };
    if let Err(error) = blocked {
        tracing::warn!(%error, key, "a penalty could not be counted or applied");
    }
}
