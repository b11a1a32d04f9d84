//! The one way to ask a store for a decision or a permit, whatever the
//! store: the [`Limiter`](crate::Limiter), the hot-key modes and the HTTP
//! layer all ask through here. A store that guards itself
//! ([`Guarded`](crate::Guarded)) decides by the caller's failure policy
//! when its backend fails; any other store answers as it is.

use std::future::Future;
use std::pin::Pin;

use super::{Boxed, Store};
use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::decision::Decision;
use crate::error::Error;
use crate::policy::Policy;
use crate::verdict::{OnStoreError, Verdict};

/// Checks a request of `cost` on `key` against `policy`, saying how it was
/// decided: a guarded store applies `on_error` when it fails (its own
/// failure policy when `None`); any other store decides itself
/// ([`Verdict::Store`]).
pub async fn verdict<S: Store>(
    store: &S,
    key: &str,
    policy: &Policy,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Result<Verdict, Error> {
    match &S::CAPABILITIES.guard {
        Some(guard) => (guard.check)(store, key, policy, cost, on_error).await,
        None => store.check(key, policy, cost).await.map(Verdict::Store),
    }
}

/// Takes a permit of `limit` on `key` (see
/// [`Permits::acquire_permit`](super::Permits::acquire_permit)); a guarded
/// store decides by `on_error` when it fails. `None` when the store keeps
/// no permits: code that names the store's type asks
/// [`Permits`](super::Permits) instead, and its absence does not compile.
#[allow(clippy::type_complexity)]
pub fn permit<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    limit: &'a ConcurrencyLimit,
    on_error: Option<OnStoreError>,
) -> Option<Pin<Box<dyn Future<Output = Result<Acquired, Error>> + Send + 'a>>> {
    if let Some(guard) = &S::CAPABILITIES.guard {
        return guard
            .permit
            .map(|permit| permit(store, key, limit, on_error));
    }
    S::CAPABILITIES
        .permits
        .map(|permit| permit(store, key, limit))
}

/// Checks like [`verdict`], and answers what the store recorded when the
/// request is allowed (see [`Refunds`](super::Refunds)): a guarded store
/// applies `on_error` when it fails, recording nothing it could give back.
/// `None` when the store cannot give requests back.
#[allow(clippy::type_complexity)]
pub fn check_refundable<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Option<Boxed<'a, (Verdict, Option<crate::Receipt>)>> {
    if let Some(guard) = &S::CAPABILITIES.guard {
        return guard
            .check_refundable
            .map(|check| check(store, key, policy, cost, on_error));
    }
    let check = S::CAPABILITIES.refunds.as_ref()?.check;
    Some(Box::pin(async move {
        let (decision, receipt) = check(store, key, policy, cost).await?;
        Ok((Verdict::Store(decision), receipt))
    }))
}

/// Gives back what `receipt` recorded on `key` (see
/// [`Refunds::refund`](super::Refunds::refund)); `None` when the store
/// cannot give requests back.
pub fn refund<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    receipt: &'a crate::Receipt,
) -> Option<Boxed<'a, ()>> {
    S::CAPABILITIES
        .refunds
        .as_ref()
        .map(|ops| (ops.refund)(store, key, policy, receipt))
}

/// What a check of `cost` on `key` would answer now, recording nothing
/// (see [`Peek`](super::Peek)); `None` when the store cannot tell.
pub fn peek<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Option<Boxed<'a, Decision>> {
    S::CAPABILITIES
        .peek
        .map(|peek| peek(store, key, policy, cost))
}

/// Forgets `key`'s state under `policy` (see [`Reset`](super::Reset));
/// `None` when the store cannot.
pub fn reset<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
) -> Option<Boxed<'a, ()>> {
    S::CAPABILITIES.reset.map(|reset| reset(store, key, policy))
}

/// Blocks `key` for `duration`, a block of `origin` (see
/// [`Blocks`](super::Blocks)); `None` when the store blocks nothing.
pub fn block<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    duration: std::time::Duration,
    origin: crate::BlockOrigin,
) -> Option<Boxed<'a, ()>> {
    S::CAPABILITIES
        .blocks
        .as_ref()
        .map(|ops| (ops.block)(store, key, duration, origin))
}

/// Lifts `key`'s block (see [`Blocks`](super::Blocks)); `None` when the
/// store blocks nothing.
pub fn unblock<'a, S: Store>(store: &'a S, key: &'a str) -> Option<Boxed<'a, ()>> {
    S::CAPABILITIES
        .blocks
        .as_ref()
        .map(|ops| (ops.unblock)(store, key))
}

/// Records a denial under `key` by `penalty` (see
/// [`Penalties`](super::Penalties)); `None` when the store counts none.
pub fn penalize<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    penalty: &'a crate::Penalty,
) -> Option<Boxed<'a, Option<std::time::Duration>>> {
    S::CAPABILITIES
        .penalize
        .map(|penalize| penalize(store, key, penalty))
}

/// Gives `key` the plan named `plan` (see
/// [`PlanAssignments`](super::PlanAssignments)); `None` when the store
/// keeps no assignments.
pub fn assign_plan<'a, S: Store>(
    store: &'a S,
    key: &'a str,
    plan: Option<&'a str>,
) -> Option<Boxed<'a, ()>> {
    S::CAPABILITIES
        .plans
        .as_ref()
        .map(|ops| (ops.assign)(store, key, plan))
}
