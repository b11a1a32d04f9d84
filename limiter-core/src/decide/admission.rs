//! The store's part of a check when the store does not decide at once,
//! owned so it runs in the check's future: the permit first, then the
//! rate, each waiting in turn when the limit waits; then the penalty.
//! What must end even when the request goes away runs
//! [detached](Detached): a penalty counted and its block, and the refund
//! of a request whose response says it does not count.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::store::{BoxFuture, COUNTING, LimitStore};
use crate::{
    Acquired, ConcurrencyLimit, Decision, Error, GiveBack, Key, OnStoreError, Penalty, Policy,
    Receipt, Refunding, Verdict, Waiters, required,
};

/// What the store answered a request: the permit (when the limit has a
/// concurrency limit) and the rate limit's verdict (unless the request is
/// not rate limited, or its permit was refused).
#[derive(Default)]
pub struct Admission {
    /// The permit's answer, when one was asked for.
    pub permit: Option<Result<Acquired, Error>>,
    /// The rate check's verdict, when the rate was checked.
    pub verdict: Option<Result<Verdict, Error>>,
    /// What gives the request back, when the limit counts by outcome and
    /// the store recorded it.
    pub refund: Option<Box<Refund>>,
    /// The request's key, given back by the checks (a denial counts the
    /// identity it names).
    pub key: Key,
}

impl Admission {
    /// The answer of a rate check alone, and its key.
    #[inline]
    pub fn rate((verdict, key): (Result<Verdict, Error>, Key)) -> Self {
        Self {
            permit: None,
            verdict: Some(verdict),
            refund: None,
            key,
        }
    }
}

/// What one request's checks need, owned so they can outlive `call`.
pub struct Checks {
    /// The store checked.
    pub store: Arc<dyn LimitStore>,
    /// The check's key.
    pub key: Key,
    /// The rate check's policy and cost; `None`: a permit alone.
    pub rate: Option<(Arc<Policy>, u64)>,
    /// The concurrency limit whose permit is taken first.
    pub concurrency: Option<ConcurrencyLimit>,
    /// The failure policy to apply; `None`: the store guard's.
    pub on_error: Option<OnStoreError>,
    /// The queues to wait in, and for how long at most.
    pub waiters: Option<(Waiters, Duration)>,
    /// Shadow mode: a denial earns no penalty.
    pub shadow: bool,
    /// A penalty counting this limit's denials, and the identity's block key.
    pub penalty: Option<(Arc<Penalty>, String)>,
    /// Recorded so that it can be given back ([`Admission::refund`]):
    /// the check counts by its outcome.
    pub counting: bool,
}

/// An admission under way.
pub enum Pending {
    /// A rate check alone: the store's own future, not boxed again.
    Rate(BoxFuture<(Result<Verdict, Error>, Key)>),
    /// A permit, or waiting: the steps in one future.
    Steps(BoxFuture<Admission>),
}

impl Pending {
    /// Polls the checks.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Admission> {
        match self {
            Self::Rate(check) => check.as_mut().poll(cx).map(Admission::rate),
            Self::Steps(steps) => steps.as_mut().poll(cx),
        }
    }
}

/// Takes the permit, then checks the rate (unless the permit was refused
/// and the limit enforces it), each waiting in turn when the limit waits.
/// Dropping the future gives back a permit taken and leaves any queue.
pub fn admit(checks: Checks) -> Pending {
    if let Checks {
        store,
        key,
        rate: Some((policy, cost)),
        concurrency: None,
        on_error,
        waiters: None,
        penalty: None,
        counting: false,
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
        counting,
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
        match counting {
            false => {
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
            true => {
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
async fn penalize(store: Arc<dyn LimitStore>, key: Key, penalty: Arc<Penalty>, block_key: String) {
    let blocked = match required(store.capabilities().as_shared_control(), "penalties") {
        Ok(shared) => {
            let penalty_key = format!("{key}:penalty");
            match shared.penalize(&penalty_key, &penalty, &block_key).await {
                Ok(Some(duration)) => {
                    let block = crate::Change::Block {
                        key: &block_key,
                        duration,
                        origin: crate::BlockOrigin::Penalty,
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
pub struct Refund {
    /// The store that recorded it.
    pub store: Arc<dyn LimitStore>,
    /// The key it was recorded on.
    pub key: Key,
    /// The policy it was checked under.
    pub policy: Arc<Policy>,
    /// What the store recorded.
    pub receipt: Receipt,
}

impl Refund {
    /// Gives the request back now.
    pub async fn refund_now(&self) -> Result<(), Error> {
        required(self.store.capabilities().as_key_state(), COUNTING)?
            .refund(&self.key, &self.policy, &self.receipt)
            .await
    }

    /// Gives the request back, counted in `limiter_refunds_total`; a
    /// failure is logged, and the request stays counted (the safe side of
    /// a limit).
    pub async fn run(self) {
        match self.refund_now().await {
            Ok(()) => metrics::counter!(REFUNDS).increment(1),
            Err(error) => {
                tracing::warn!(%error, key = %self.key, "a request could not be given back")
            }
        }
    }
}

impl GiveBack for Refund {
    fn receipt(&self) -> &Receipt {
        &self.receipt
    }

    fn give_back(self: Box<Self>) -> Refunding {
        Box::pin(async move { self.refund_now().await })
    }
}

/// Detached work under way.
pub enum Detached {
    /// On the runtime, where it ends even if this is dropped.
    Spawned(tokio::task::JoinHandle<()>),
    /// Without a runtime to spawn on: polled here.
    Here(BoxFuture<()>),
}

impl Detached {
    /// Starts `work`, polled here once first: `None` when that finished it
    /// (the memory store's calls), else the work under way.
    pub fn start(mut work: BoxFuture<()>, cx: &mut Context<'_>) -> Option<Self> {
        if work.as_mut().poll(cx).is_ready() {
            return None;
        }
        Some(match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Self::Spawned(runtime.spawn(work)),
            Err(_) => Self::Here(work),
        })
    }

    /// Runs `work` to its end, detached from the caller's future.
    pub async fn run(work: BoxFuture<()>) {
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

    /// Polls the work.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            // Work that panicked is over too.
            Self::Spawned(task) => Pin::new(task).poll(cx).map(|_| ()),
            Self::Here(work) => work.as_mut().poll(cx),
        }
    }
}

macro_rules! opaque_debug {
    ($($name:ident),*) => {$(
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    )*};
}

opaque_debug!(Admission, Checks, Pending, Refund, Detached);
