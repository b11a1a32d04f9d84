//! The hot-key mode (`lease`, `shards` or `sample`), checked through
//! limiter-model's `Lease::new`, `Policy::with_lease`, `with_shards` and
//! `with_sampling`, whose errors become compile errors.

use limiter_model::{ConfigError, DEFAULT_LEASE_TTL, Lease, Policy};
use quote::ToTokens as _;
use syn::Error;

use crate::parse::{DurationLit, HotArgs, Int, LeaseLit};

/// The hot-key mode limiter-model accepted, as written.
pub(crate) enum Hot<'a> {
    /// `.with_lease(Lease::new(max, ttl))`; without `ttl`, limiter-model's
    /// `DEFAULT_LEASE_TTL`.
    Lease {
        max: &'a Int,
        ttl: Option<&'a DurationLit>,
    },
    /// `.with_shards(count)`.
    Shards(&'a Int),
    /// `.with_sampling(every)`.
    Sample(&'a Int),
}

/// `policy` with the hot-key mode `hot` asks for, if any.
pub(crate) fn apply(hot: &HotArgs, policy: Policy) -> syn::Result<(Policy, Option<Hot<'_>>)> {
    let given = [
        hot.lease.as_ref().map(|a| a.keyword.to_token_stream()),
        hot.shards.as_ref().map(|a| a.keyword.to_token_stream()),
        hot.sample.as_ref().map(|a| a.keyword.to_token_stream()),
    ];
    if let [_, second, ..] = given.iter().flatten().collect::<Vec<_>>()[..] {
        return Err(Error::new_spanned(
            second,
            "`lease`, `shards` and `sample` exclude each other: choose one hot-key mode",
        ));
    }
    if let Some(lease) = &hot.lease {
        let LeaseLit { max, ttl } = &lease.value;
        let length = ttl.as_ref().map_or(DEFAULT_LEASE_TTL, |ttl| ttl.value);
        let built = Lease::new(max.value, length).map_err(|error| match (&error, ttl) {
            (ConfigError::InvalidHotKey { reason, .. }, Some(ttl)) if reason.contains("lasts") => {
                Error::new_spanned(&ttl.written, error)
            }
            _ => Error::new_spanned(&max.lit, error),
        })?;
        let value = policy
            .with_lease(built)
            .map_err(|error| Error::new_spanned(lease.keyword, error))?;
        let ttl = ttl.as_ref();
        return Ok((value, Some(Hot::Lease { max, ttl })));
    }
    if let Some(shards) = &hot.shards {
        let count = u32_of(&shards.value)?;
        let value = policy
            .with_shards(count)
            .map_err(|error| Error::new_spanned(&shards.value.lit, error))?;
        return Ok((value, Some(Hot::Shards(&shards.value))));
    }
    if let Some(sample) = &hot.sample {
        let every = u32_of(&sample.value)?;
        let value = policy
            .with_sampling(every)
            .map_err(|error| Error::new_spanned(&sample.value.lit, error))?;
        return Ok((value, Some(Hot::Sample(&sample.value))));
    }
    Ok((policy, None))
}

fn u32_of(int: &Int) -> syn::Result<u32> {
    u32::try_from(int.value)
        .map_err(|_| Error::new_spanned(&int.lit, format!("`{}` is too large", int.value)))
}
