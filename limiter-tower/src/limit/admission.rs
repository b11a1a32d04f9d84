//! What a check is made with ([`Reading`]), and the store's part of it
//! when the store does not decide at once,
//! owned so it runs in the limit's future: the permit first, then the
//! rate, each waiting in turn when the limit waits; then the penalty.
//! What must end even when the request goes away runs
//! [detached](Detached): a penalty counted and its block, and the refund
//! of a request whose response says it does not count.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use limiter_core::{
    Acquired, ConcurrencyLimit, Decision, Error, Key, OnStoreError, Penalty, Policy, Receipt,
    Verdict, Waiters, required,
};

use super::route::RouteLimit;
use crate::context::{BoxFuture, COUNTING, DynStore};
use crate::options::CountWhen;
use crate::response::{HeaderOptions, Refusal, RouteFields};

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
    pub(crate) key: Key,
}

impl Admission {
    /// The answer of a rate check alone, and its key.
    #[inline]
    pub(crate) fn rate((verdict, key): (Result<Verdict, Error>, Key)) -> Self {
        Self {
            permit: None,
            verdict: Some(verdict),
            refund: None,
            key,
        }
    }
}

/// How a request's answer is read.
pub(crate) struct Reading {
    pub(crate) headers: HeaderOptions,
    /// Shadow mode: denials are counted and logged, never enforced.
    pub(crate) shadow: bool,
    /// The request's plan, whose fields and names replace the limit's.
    pub(crate) plan: Option<Box<PlanFields>>,
    /// The request's cost, when it is not the policy's (a cost resolver).
    pub(crate) cost: Option<u64>,
    /// A live override holds: the decision is counted apart.
    pub(crate) overridden: bool,
}

impl Reading {
    /// How the answer of a limit without options is read.
    #[inline]
    pub(crate) fn plain(headers: HeaderOptions) -> Self {
        Self {
            headers,
            shadow: false,
            plan: None,
            cost: None,
            overridden: false,
        }
    }

    /// The policy the request is checked with: its plan's, or the limit's.
    #[inline]
    pub(crate) fn policy<'a>(&'a self, limit: &'a RouteLimit) -> &'a Arc<Policy> {
        self.plan
            .as_ref()
            .map_or(&limit.policy, |plan| &plan.policy)
    }
}

/// The policy, fields and item names of a request's plan.
pub(crate) struct PlanFields {
    pub(crate) policy: Arc<Policy>,
    pub(crate) fields: RouteFields,
    pub(crate) names: Box<[String]>,
}

/// What one request's checks need, owned so they can outlive `call`.
pub(crate) struct Checks {
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) key: Key,
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
    Rate(BoxFuture<(Result<Verdict, Error>, Key)>),
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
                    Some((waiters, max)) => waiters.acquire(key.as_str(), *max, check).await,
                    None => check().await,
                });
            }
            Some(counts) => {
                let checked = match required(store.capabilities().as_key_state(), COUNTING) {
                    Ok(refunds) => {
                        let named = store.under(&policy, on_error);
                        let check = || async {
                            let checked = refunds.check_refundable(&key, &named, cost).await;
                            refundable_verdict(checked)
                        };
                        match &waiters {
                            Some((waiters, max)) => {
                                waiters.acquire(key.as_str(), *max, check).await
                            }
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

/// How a check counted by outcome was decided (see [`Verdict::of`]): a
/// receipt only from the store.
fn refundable_verdict(
    checked: Result<(Decision, Option<Receipt>), Error>,
) -> Result<(Verdict, Option<Receipt>), Error> {
    match checked {
        Ok((decision, receipt)) => Ok((Verdict::of(Ok(decision))?, receipt)),
        Err(error) => Ok((Verdict::of(Err(error))?, None)),
    }
}

/// Counts a denial of `key` by `penalty`, and blocks `block_key` when it
/// earns a block. A store that fails here leaves the denial as it is.
async fn penalize(store: Arc<dyn DynStore>, key: Key, penalty: Arc<Penalty>, block_key: String) {
    let blocked = match required(store.capabilities().as_shared_control(), "penalties") {
        Ok(shared) => {
            let penalty_key = format!("{key}:penalty");
            match shared.penalize(&penalty_key, &penalty, &block_key).await {
                Ok(Some(duration)) => {
                    let block = limiter_core::Change::Block {
                        key: &block_key,
                        duration,
                        origin: limiter_core::BlockOrigin::Penalty,
                    };
                    shared.change(block).await
                }
                Ok(None) => Ok(()),
                Err(error) => Err(error),
            }
        }
        Err(unsupported) => Err(unsupported),
    };
    if let Err(error) = blocked {
        tracing::warn!(%error, %key, "a penalty could not be counted or applied");
    }
}

/// Counter: requests given back because their response did not count.
const REFUNDS: &str = "limiter_refunds_total";

/// What gives one admitted request back.
pub(crate) struct Refund {
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) key: Key,
    pub(crate) policy: Arc<Policy>,
    pub(crate) receipt: Receipt,
    pub(crate) counts: CountWhen,
}

impl Refund {
    /// A refund made only when asked ([`Attempt::refund`](limiter_core::Attempt::refund)):
    /// no response settles it.
    pub(crate) fn always_counted(
        store: Arc<dyn DynStore>,
        key: Key,
        policy: Arc<Policy>,
        receipt: Receipt,
    ) -> Self {
        Self {
            store,
            key,
            policy,
            receipt,
            counts: Arc::new(|_: http::StatusCode, _: &http::HeaderMap| true),
        }
    }

    /// Gives the request back unless its response says it counts: `None`
    /// when it counts or the refund is made already (the memory store's,
    /// on the first poll), else the refund under way. A response the
    /// limiter made itself (another limit's 429, a block, a refusal) never
    /// counts: the handler decided no outcome.
    pub(crate) fn settle<B>(
        self,
        response: &http::Response<B>,
        cx: &mut Context<'_>,
    ) -> Option<Detached> {
        let refused = response.extensions().get::<Refusal>().is_some();
        if !refused && (self.counts)(response.status(), response.headers()) {
            return None;
        }
        Detached::start(Box::pin(self.run()), cx)
    }

    /// Gives the request back now.
    /// Gives the request back now, whatever its response.
    pub(crate) async fn refund_now(&self) -> Result<(), Error> {
        required(self.store.capabilities().as_key_state(), COUNTING)?
            .refund(&self.key, &self.policy, &self.receipt)
            .await
    }

    async fn run(self) {
        match self.refund_now().await {
            Ok(()) => metrics::counter!(REFUNDS).increment(1),
            // The request stays counted: the safe side of a limit.
            Err(error) => {
                tracing::warn!(%error, key = %self.key, "a request could not be given back")
            }
        }
    }
}

/// Detached work under way.
pub(crate) enum Detached {
    /// On the runtime, where it ends even if this is dropped.
    Spawned(tokio::task::JoinHandle<()>),
    /// Without a runtime to spawn on: polled here.
    Here(BoxFuture<()>),
}

impl Detached {
    /// Starts `work`, polled here once first: `None` when that finished it
    /// (the memory store's calls), else the work under way.
    pub(crate) fn start(mut work: BoxFuture<()>, cx: &mut Context<'_>) -> Option<Self> {
        if work.as_mut().poll(cx).is_ready() {
            return None;
        }
        Some(match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Self::Spawned(runtime.spawn(work)),
            Err(_) => Self::Here(work),
        })
    }

    /// Runs `work` to its end, detached from the caller's future.
    pub(crate) async fn run(work: BoxFuture<()>) {
        let mut work = Some(work);
        let mut under_way: Option<Self> = None;
        std::future::poll_fn(|cx| {
            if let Some(work) = work.take() {
                match Self::start(work, cx) {
                    None => return Poll::Ready(()),
                    Some(started) => under_way = Some(started),
                }
            }
            under_way.as_mut().map_or(Poll::Ready(()), |w| w.poll(cx))
        })
        .await;
    }

    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            // Work that panicked is over too.
            Self::Spawned(task) => Pin::new(task).poll(cx).map(|_| ()),
            Self::Here(work) => work.as_mut().poll(cx),
        }
    }
}
