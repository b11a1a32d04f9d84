//! Check: the parsed arguments judged by limiter-model's own constructors
//! (`Rule::new`, `Policy::sliding_log`, `ConcurrencyLimit::new`...), into a
//! checked model that expansion only writes out: a limit that compiles
//! builds at run time.

mod business;
mod hot;
mod policy;

use syn::LitStr;

use crate::parse::{Args, By, Int, OnStoreError};

pub(crate) use business::{Business, Counting, Wait};
pub(crate) use hot::Hot;
/// The policy alone, for the tests of its checks.
#[cfg(test)]
pub(crate) use policy::policy;
pub(crate) use policy::{Constructor, DuplicateWindow, Policy};

/// A handler's limit, as limiter-model accepted it.
pub(crate) struct Limit<'a> {
    pub(crate) layer: Layer<'a>,
    /// Whose requests share the limit; the client's IP when `None`.
    pub(crate) by: Option<&'a By>,
    pub(crate) key: Option<&'a LitStr>,
    pub(crate) message: Option<&'a LitStr>,
    pub(crate) on_store_error: Option<&'a OnStoreError>,
    pub(crate) business: Business<'a>,
}

/// What the handler's `LimitLayer` limits.
pub(crate) enum Layer<'a> {
    /// `LimitLayer::new`: a rate limit (boxed: a policy is large).
    Rate(Box<Policy<'a>>),
    /// `LimitLayer::concurrent`: a concurrency limit alone.
    Concurrency(&'a Int),
}

/// Checks `args` through limiter-model, reporting every mistake at once: the
/// business arguments', then the policy's.
pub(crate) fn limit(args: &Args) -> syn::Result<Limit<'_>> {
    let business = business::business(args);
    let layer = match args.concurrency_alone() {
        Some(concurrency) => business::concurrency_limit(concurrency).map(Layer::Concurrency),
        None => policy::policy(args).and_then(|policy| {
            business::check_counting(args, &policy.value)?;
            Ok(Layer::Rate(Box::new(policy)))
        }),
    };
    let (business, layer) = match (business, layer) {
        (Ok(business), Ok(layer)) => (business, layer),
        (Err(mut error), Err(layer)) => {
            error.combine(layer);
            return Err(error);
        }
        (Err(error), _) | (_, Err(error)) => return Err(error),
    };
    Ok(Limit {
        layer,
        by: args.by.as_ref().map(|by| &by.value),
        key: args.key.as_ref().map(|key| &key.value),
        message: args.message.as_ref().map(|message| &message.value),
        on_store_error: args.on_store_error.as_ref().map(|policy| &policy.value),
        business,
    })
}
