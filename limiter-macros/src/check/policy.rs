//! The policy, built through limiter-model while the attribute expands.
//!
//! limiter-model's constructors are the only judge of the numbers. The
//! checked [`Policy`] records each call made here, with the values as
//! written, and the code that builds the policy at run time makes the same
//! calls (`expand::policy`): what compiled here succeeds there. A
//! [`ConfigError`] becomes a compile error on the token it is about, with
//! limiter-model's message.

use limiter_model::{ConfigError, DEFAULT_DUPLICATE_WINDOW, Rate, Rule};
use proc_macro2::Span;
use syn::Error;

use crate::check::hot::{self, Hot};
use crate::parse::{Algorithm, AlgorithmKind, Args, Bucket, DurationLit, Int, RateLit, RuleLit};

/// A policy limiter-model accepted, and the calls that built it, in order.
pub(crate) struct Policy<'a> {
    /// limiter-model's policy, for the checks made with it
    /// (`counts_by_outcome`).
    pub(crate) value: limiter_model::Policy,
    pub(crate) constructor: Constructor<'a>,
    /// `.with_prevent_duplicate(window)`.
    pub(crate) prevent_duplicate: Option<DuplicateWindow<'a>>,
    /// `.with_cost(cost)`.
    pub(crate) cost: Option<&'a Int>,
    /// `.with_lease`, `.with_shards` or `.with_sampling`.
    pub(crate) hot: Option<Hot<'a>>,
}

/// The constructor a policy starts from, with its arguments.
pub(crate) enum Constructor<'a> {
    /// `Policy::sliding_log(rules)`.
    SlidingLog(&'a [RuleLit]),
    /// `Policy::fixed_window(rule)`.
    FixedWindow(&'a RuleLit),
    /// `Policy::sliding_window(rule)`.
    SlidingWindow(&'a RuleLit),
    /// `Policy::token_bucket(rate, burst)`.
    TokenBucket(&'a Bucket),
    /// `Policy::leaky_bucket(rate, capacity)`.
    LeakyBucket(&'a Bucket),
    /// `Policy::gcra(rate, burst)`.
    Gcra(&'a Bucket),
}

/// The window of `prevent_duplicate`.
pub(crate) enum DuplicateWindow<'a> {
    /// limiter-model's `DEFAULT_DUPLICATE_WINDOW`.
    Default,
    Written(&'a DurationLit),
}

/// The policy `args` describe: the algorithm, then `prevent_duplicate`, then
/// the cost, then the hot-key mode, in the order limiter-model's docs build
/// it.
pub(crate) fn policy(args: &Args) -> syn::Result<Policy<'_>> {
    let (value, constructor) = algorithm(args)?;
    let (value, prevent_duplicate) = prevent_duplicate(args, value)?;
    let (value, cost) = cost(args, value)?;
    let (value, hot) = hot::apply(&args.hot, value)?;
    Ok(Policy {
        value,
        constructor,
        prevent_duplicate,
        cost,
        hot,
    })
}

fn algorithm(args: &Args) -> syn::Result<(limiter_model::Policy, Constructor<'_>)> {
    let Some(algorithm) = &args.algorithm else {
        return sliding_log(args, Span::call_site());
    };
    let Algorithm { name, kind } = &algorithm.value;
    match kind {
        AlgorithmKind::SlidingLog => sliding_log(args, name.span()),
        AlgorithmKind::FixedWindow => {
            let (rule, written) = one_rule(args, name)?;
            let value = limiter_model::Policy::fixed_window(rule);
            Ok((value, Constructor::FixedWindow(written)))
        }
        AlgorithmKind::SlidingWindow => {
            let (rule, written) = one_rule(args, name)?;
            let value = limiter_model::Policy::sliding_window(rule);
            Ok((value, Constructor::SlidingWindow(written)))
        }
        AlgorithmKind::TokenBucket(bucket) => {
            let value = self::bucket(args, name, bucket, limiter_model::Policy::token_bucket)?;
            Ok((value, Constructor::TokenBucket(bucket)))
        }
        AlgorithmKind::LeakyBucket(bucket) => {
            let value = self::bucket(args, name, bucket, limiter_model::Policy::leaky_bucket)?;
            Ok((value, Constructor::LeakyBucket(bucket)))
        }
        AlgorithmKind::Gcra(bucket) => {
            let value = self::bucket(args, name, bucket, limiter_model::Policy::gcra)?;
            Ok((value, Constructor::Gcra(bucket)))
        }
    }
}

/// `Policy::sliding_log`; `span` is where a missing `rules` is reported.
fn sliding_log(args: &Args, span: Span) -> syn::Result<(limiter_model::Policy, Constructor<'_>)> {
    let Some(rules) = &args.rules else {
        return Err(Error::new(
            span,
            "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`",
        ));
    };
    let written = &rules.value;
    let built = written
        .rules
        .iter()
        .map(rule)
        .collect::<syn::Result<Vec<_>>>()?;
    let value = limiter_model::Policy::sliding_log(built).map_err(|error| {
        let span = match &error {
            ConfigError::TooManyRules { max, .. } => {
                written.rules.get(*max).map(|r| r.paren.span.join())
            }
            _ => None,
        };
        Error::new(span.unwrap_or(written.bracket.span.join()), error)
    })?;
    Ok((value, Constructor::SlidingLog(&written.rules)))
}

/// The single rule of a fixed or sliding window (their constructors take one).
fn one_rule<'a>(args: &'a Args, algorithm: &syn::Ident) -> syn::Result<(Rule, &'a RuleLit)> {
    let Some(rules) = &args.rules else {
        return Err(Error::new(
            algorithm.span(),
            format!(
                "missing `rules`: {algorithm} needs exactly one rule, like `rules = [(100, 60s)]`"
            ),
        ));
    };
    let written = &rules.value;
    match written.rules.as_slice() {
        [only] => Ok((rule(only)?, only)),
        rules => Err(Error::new(
            rules
                .get(1)
                .map_or(written.bracket.span.join(), |extra| extra.paren.span.join()),
            ConfigError::RuleCount {
                algorithm: algorithm.to_string(),
                count: rules.len(),
            },
        )),
    }
}

/// `Rule::new(limit, window)`.
fn rule(rule: &RuleLit) -> syn::Result<Rule> {
    let RuleLit {
        paren,
        limit,
        window,
    } = rule;
    Rule::new(limit.value, window.value).map_err(|error| match error {
        ConfigError::ZeroLimit { .. } | ConfigError::TooLarge { .. } => {
            Error::new_spanned(&limit.lit, error)
        }
        ConfigError::ZeroWindow { .. } | ConfigError::WindowTooLong { .. } => {
            Error::new_spanned(&window.written, error)
        }
        _ => Error::new(paren.span.join(), error),
    })
}

/// `Rate::new(amount, period)`.
fn rate(rate: &RateLit) -> syn::Result<Rate> {
    let RateLit { amount, period } = rate;
    Rate::new(amount.value, period.value).map_err(|error| match error {
        ConfigError::ZeroRate { amount: 0, .. } | ConfigError::TooLarge { .. } => {
            Error::new_spanned(&amount.lit, error)
        }
        _ => Error::new_spanned(&period.written, error),
    })
}

/// `Policy::token_bucket`, `leaky_bucket` or `gcra`: a rate and a size.
fn bucket(
    args: &Args,
    name: &syn::Ident,
    bucket: &Bucket,
    constructor: fn(Rate, u64) -> Result<limiter_model::Policy, ConfigError>,
) -> syn::Result<limiter_model::Policy> {
    if let Some(rules) = &args.rules {
        let algorithm = name.to_string();
        let (size, example) = Algorithm::bucket_syntax(&algorithm).expect("a bucket or GCRA");
        return Err(Error::new_spanned(
            rules.keyword,
            format!(
                "{algorithm} does not take `rules`: its limit is its `rate` and `{}`, like `{example}`",
                size.as_str()
            ),
        ));
    }
    let Bucket {
        rate: written,
        size,
    } = bucket;
    constructor(rate(written)?, size.value).map_err(|error| match error {
        ConfigError::ZeroCapacity { .. } | ConfigError::TooLarge { .. } => {
            Error::new_spanned(&size.lit, error)
        }
        _ => Error::new_spanned(name, error),
    })
}

/// `.with_prevent_duplicate(window)`, when asked for.
fn prevent_duplicate(
    args: &Args,
    policy: limiter_model::Policy,
) -> syn::Result<(limiter_model::Policy, Option<DuplicateWindow<'_>>)> {
    let Some(prevent) = &args.prevent_duplicate else {
        return Ok((policy, None));
    };
    let (window, written) = match &prevent.value {
        Some(window) => (window.value, DuplicateWindow::Written(window)),
        None => (DEFAULT_DUPLICATE_WINDOW, DuplicateWindow::Default),
    };
    let value =
        policy
            .with_prevent_duplicate(window)
            .map_err(|error| match (&error, &prevent.value) {
                (
                    ConfigError::ZeroWindow { .. } | ConfigError::WindowTooLong { .. },
                    Some(window),
                ) => Error::new_spanned(&window.written, error),
                (ConfigError::TooManyRules { .. }, _) => Error::new_spanned(
                    prevent.keyword,
                    format!("{error}: `prevent_duplicate` adds one"),
                ),
                _ => Error::new_spanned(prevent.keyword, error),
            })?;
    Ok((value, Some(written)))
}

/// `.with_cost(cost)`, when given.
fn cost(
    args: &Args,
    policy: limiter_model::Policy,
) -> syn::Result<(limiter_model::Policy, Option<&Int>)> {
    let Some(cost) = &args.cost else {
        return Ok((policy, None));
    };
    let cost = &cost.value;
    let value = policy
        .with_cost(cost.value)
        .map_err(|error| Error::new_spanned(&cost.lit, error))?;
    Ok((value, Some(cost)))
}
