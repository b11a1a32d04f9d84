//! The checks of a request to a limit with business features, owned so
//! they run in the limit's future: the permit first, then the rate, each
//! waiting in turn when the limit waits.

use std::sync::Arc;
use std::time::Duration;

use limiter_core::{Acquired, ConcurrencyLimit, Error, OnStoreError, Policy, Verdict, Waiters};

use crate::context::{BoxFuture, DynStore};

/// What the checks of one request answered: the permit (when the limit
/// has a concurrency limit) and the rate limit's verdict (unless the
/// request was not rate limited, or its permit was refused).
#[derive(Default)]
pub(crate) struct Admission {
    pub(crate) permit: Option<Result<Acquired, Error>>,
    pub(crate) verdict: Option<Result<Verdict, Error>>,
}

/// What one request's checks need, owned so they can outlive `call`.
pub(crate) struct Checks {
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) key: String,
    pub(crate) rate: Option<(Arc<Policy>, u64)>,
    pub(crate) concurrency: Option<(String, ConcurrencyLimit)>,
    pub(crate) on_error: Option<OnStoreError>,
    pub(crate) waiters: Option<(Waiters, Duration)>,
    pub(crate) shadow: bool,
}

/// Takes the permit, then checks the rate (unless the permit was refused
/// and the limit enforces it), each waiting in turn when the limit waits.
/// Dropping the future gives back a permit taken and leaves any queue.
pub(crate) fn admit(checks: Checks) -> BoxFuture<Admission> {
    Box::pin(async move {
        let Checks {
            store,
            key,
            rate,
            concurrency,
            on_error,
            waiters,
            shadow,
        } = checks;
        let mut admission = Admission::default();
        if let Some((key, limit)) = concurrency {
            let acquire = || Arc::clone(&store).acquire_permit_owned(key.clone(), limit, on_error);
            let acquired = match &waiters {
                Some((waiters, max)) => waiters.acquire(&key, *max, acquire).await,
                None => acquire().await,
            };
            let proceed = shadow || matches!(acquired, Ok(Acquired::Permit(_)));
            admission.permit = Some(acquired);
            if !proceed {
                return admission;
            }
        }
        if let Some((policy, cost)) = rate {
            let check =
                || Arc::clone(&store).check_owned(key.clone(), Arc::clone(&policy), cost, on_error);
            admission.verdict = Some(match &waiters {
                Some((waiters, max)) => waiters.acquire(&key, *max, check).await,
                None => check().await,
            });
        }
        admission
    })
}
