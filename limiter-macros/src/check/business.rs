//! The business arguments, checked through limiter-model
//! (`ConcurrencyLimit::new`, `MaxWait::new`, `Penalty::new`,
//! `Policy::counts_by_outcome`) and against each other, every mistake
//! reported on its token.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use limiter_model::{ConcurrencyLimit, ConfigError, MaxWait, Penalty};
use quote::ToTokens;
use syn::{Error, LitStr, Path};

use crate::parse::{Arg, Args, BusinessArgs, By, DurationLit, Int, PenaltyLit, combine};

/// The business arguments limiter-model accepted: each becomes a setter call
/// on the handler's `LimitLayer`.
pub(crate) struct Business<'a> {
    /// `.plans(fn)`.
    pub(crate) plans: Option<&'a Path>,
    /// `.cost(fn)`.
    pub(crate) cost: Option<&'a Path>,
    /// `.allow_ips(..)`: every entry a network or an address.
    pub(crate) allow: Option<&'a [LitStr]>,
    pub(crate) allow_identities: Option<&'a [LitStr]>,
    /// `.deny_ips(..)`: every entry a network or an address.
    pub(crate) deny: Option<&'a [LitStr]>,
    pub(crate) deny_identities: Option<&'a [LitStr]>,
    pub(crate) shadow: bool,
    pub(crate) penalty: Option<&'a PenaltyLit>,
    pub(crate) wait: Option<Wait<'a>>,
    /// Beside a rate limit: `.concurrency(..)`.
    pub(crate) concurrency: Option<&'a Int>,
    /// `.count_when(..)`, when only some responses count.
    pub(crate) counting: Option<Counting<'a>>,
}

/// `wait = ..`, and which requests wait (`wait_when`) unless all do.
pub(crate) struct Wait<'a> {
    pub(crate) max: &'a DurationLit,
    pub(crate) when: Option<&'a Path>,
}

/// Which responses count.
pub(crate) enum Counting<'a> {
    /// `count_when = path`: those it answers `true` for.
    When(&'a Path),
    /// `count_failures`: those of status 400 or more.
    Failures,
}

/// Checks `args`' business arguments, reporting every mistake on its token.
///
/// A concurrency limit alone is not among them: it is the layer's limit
/// (`check::limit`).
pub(crate) fn business<'a>(args: &'a Args) -> syn::Result<Business<'a>> {
    let written = &args.business;
    let mut errors = Vec::new();
    if let (Some(cost), Some(_)) = (&written.cost, &args.cost) {
        errors.push(Error::new_spanned(
            cost.keyword,
            "duplicate argument `cost`",
        ));
    }
    let allow = nets(&written.allow, &mut errors);
    let deny = nets(&written.deny, &mut errors);
    let penalty = penalty(args, &mut errors);
    let wait = wait(written, &mut errors);
    let counting = counting(args, &mut errors);
    let concurrency = match &written.concurrency {
        Some(_) if args.concurrency_alone().is_some() => None,
        Some(concurrency) => concurrency_limit(concurrency)
            .map_err(|error| errors.push(error))
            .ok(),
        None => None,
    };
    if let Some(error) = combine(errors) {
        return Err(error);
    }
    Ok(Business {
        plans: written.plans.as_ref().map(|plans| &plans.value),
        cost: written.cost.as_ref().map(|cost| &cost.value),
        allow,
        allow_identities: values(&written.allow_identities),
        deny,
        deny_identities: values(&written.deny_identities),
        shadow: written.shadow.is_some(),
        penalty,
        wait,
        concurrency,
        counting,
    })
}

/// `ConcurrencyLimit::new(max)`.
pub(crate) fn concurrency_limit(concurrency: &Arg<impl ToTokens, Int>) -> syn::Result<&Int> {
    let max = &concurrency.value;
    match ConcurrencyLimit::new(max.value) {
        Ok(_) => Ok(max),
        Err(error @ (ConfigError::ZeroConcurrency | ConfigError::TooLarge { .. })) => {
            Err(Error::new_spanned(&max.lit, error))
        }
        Err(error) => Err(Error::new_spanned(&concurrency.keyword, error)),
    }
}

/// Refuses counting by outcome (`count_when`, `count_failures`) with a
/// policy whose algorithm cannot give a request back, through
/// limiter-model's own check.
pub(crate) fn check_counting(args: &Args, policy: &limiter_model::Policy) -> syn::Result<()> {
    let Some(keyword) = args.business.counting() else {
        return Ok(());
    };
    policy
        .counts_by_outcome()
        .map_err(|error| Error::new(keyword, error))
}

/// The entries of `allow` or `deny`, when each is a network or an address.
fn nets<'a, K>(
    list: &'a Option<Arg<K, Vec<LitStr>>>,
    errors: &mut Vec<Error>,
) -> Option<&'a [LitStr]> {
    let list = &list.as_ref()?.value;
    for text in list {
        if let Err(why) = parse_net(&text.value()) {
            errors.push(Error::new_spanned(text, why));
        }
    }
    Some(list)
}

/// The strings of `allow_identities` or `deny_identities`.
fn values<K>(list: &Option<Arg<K, Vec<LitStr>>>) -> Option<&[LitStr]> {
    list.as_ref().map(|list| list.value.as_slice())
}

/// A network in CIDR notation, or a single address.
fn parse_net(text: &str) -> Result<IpNet, String> {
    IpNet::from_str(text)
        .or_else(|_| IpAddr::from_str(text).map(IpNet::from))
        .map_err(|_| format!("{text:?} is not an IP network (like \"10.0.0.0/8\") nor an address"))
}

/// The penalty, when an identity can earn it and limiter-model accepts it.
fn penalty<'a>(args: &'a Args, errors: &mut Vec<Error>) -> Option<&'a PenaltyLit> {
    let penalty = args.business.penalty.as_ref()?;
    let error = if matches!(args.by.as_ref().map(|b| &b.value), Some(By::Global)) {
        Error::new_spanned(
            penalty.keyword,
            "a penalty blocks an identity, and `by = global` has none",
        )
    } else if args.concurrency_alone().is_some() {
        Error::new_spanned(
            penalty.keyword,
            "a penalty counts a rate limit's denials: add `rules = [...]`",
        )
    } else {
        match check_penalty(&penalty.value) {
            Ok(()) => return Some(&penalty.value),
            Err(error) => error,
        }
    };
    errors.push(error);
    None
}

/// `Penalty::new(after, within, blocks)`.
fn check_penalty(penalty: &PenaltyLit) -> syn::Result<()> {
    let after = u32::try_from(penalty.after.value)
        .map_err(|_| Error::new_spanned(&penalty.after.lit, "too many denials"))?;
    let blocks = penalty.blocks.iter().map(|block| block.value);
    Penalty::new(after, penalty.within.value, blocks)
        .map_err(|error| Error::new(penalty.span, error))?;
    Ok(())
}

/// `wait`, and `wait_when` beside it.
fn wait<'a>(written: &'a BusinessArgs, errors: &mut Vec<Error>) -> Option<Wait<'a>> {
    match (&written.wait, &written.wait_when) {
        (Some(wait), when) => match MaxWait::new(wait.value.value) {
            Ok(_) => Some(Wait {
                max: &wait.value,
                when: when.as_ref().map(|when| &when.value),
            }),
            Err(error) => {
                errors.push(Error::new_spanned(&wait.value.written, error));
                None
            }
        },
        (None, Some(when)) => {
            errors.push(Error::new_spanned(
                when.keyword,
                "`wait_when` chooses which requests wait: it needs `wait = ...`, the longest wait",
            ));
            None
        }
        (None, None) => None,
    }
}

/// Which responses count, when only some do.
fn counting<'a>(args: &'a Args, errors: &mut Vec<Error>) -> Option<Counting<'a>> {
    let written = &args.business;
    let keyword = written.counting()?;
    if let (Some(_), Some(failures)) = (&written.count_when, &written.count_failures) {
        errors.push(Error::new_spanned(
            failures,
            "`count_failures` is a `count_when`: give one of them",
        ));
        return None;
    }
    if args.concurrency_alone().is_some() {
        errors.push(Error::new(
            keyword,
            "counting by outcome gives back a rate limit's requests: add `rules = [...]`",
        ));
        return None;
    }
    Some(match &written.count_when {
        Some(when) => Counting::When(&when.value),
        None => Counting::Failures,
    })
}
