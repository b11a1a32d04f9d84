//! The policy, built through limiter-core while the attribute expands.
//!
//! limiter-core's constructors are the only judge of the numbers. Each call
//! made here is written out beside it, with the same values, as the code
//! that builds the policy at run time: what compiled here succeeds there. A
//! [`ConfigError`] becomes a compile error on the token it is about, with
//! limiter-core's message.

use limiter_core::{ConfigError, DEFAULT_DUPLICATE_WINDOW, Policy, Rate, Rule};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::Error;

use crate::args::{Algorithm, AlgorithmKind, Args, Bucket};
use crate::generate::private;
use crate::values::{RateLit, RuleLit, RulesLit};

/// A value built through limiter-core, and the expression that builds it
/// again at run time (inside a function returning `Result<_, ConfigError>`,
/// so `?` never fails there: it did not fail here).
pub(crate) struct Built<T> {
    pub(crate) value: T,
    pub(crate) tokens: TokenStream,
}

/// The policy `args` describe: the algorithm, then `prevent_duplicate`, then
/// the cost, in the order limiter-core's docs build it.
pub(crate) fn policy(args: &Args) -> syn::Result<Built<Policy>> {
    let policy = algorithm(args)?;
    let policy = prevent_duplicate(args, policy)?;
    let policy = cost(args, policy)?;
    args.hot.apply(policy)
}

fn algorithm(args: &Args) -> syn::Result<Built<Policy>> {
    let core = private();
    let Some(algorithm) = &args.algorithm else {
        return sliding_log(args, Span::call_site());
    };
    let Algorithm { name, kind } = &algorithm.value;
    match kind {
        AlgorithmKind::SlidingLog => sliding_log(args, name.span()),
        AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindow => {
            let rule = one_rule(args, name)?;
            let (value, constructor) = match kind {
                AlgorithmKind::FixedWindow => {
                    (Policy::fixed_window(rule.value), quote!(fixed_window))
                }
                _ => (Policy::sliding_window(rule.value), quote!(sliding_window)),
            };
            let rule = rule.tokens;
            Ok(Built {
                value,
                tokens: quote!(#core::Policy::#constructor(#rule)),
            })
        }
        AlgorithmKind::TokenBucket(bucket) => build_bucket(
            args,
            name,
            bucket,
            Policy::token_bucket,
            quote!(token_bucket),
        ),
        AlgorithmKind::LeakyBucket(bucket) => build_bucket(
            args,
            name,
            bucket,
            Policy::leaky_bucket,
            quote!(leaky_bucket),
        ),
        AlgorithmKind::Gcra(bucket) => build_bucket(args, name, bucket, Policy::gcra, quote!(gcra)),
    }
}

/// `Policy::sliding_log`; `span` is where a missing `rules` is reported.
fn sliding_log(args: &Args, span: Span) -> syn::Result<Built<Policy>> {
    let Some(rules) = &args.rules else {
        return Err(Error::new(
            span,
            "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`",
        ));
    };
    let RulesLit { bracket, rules } = &rules.value;
    let built = rules.iter().map(rule).collect::<syn::Result<Vec<_>>>()?;
    let value = Policy::sliding_log(built.iter().map(|rule| rule.value)).map_err(|error| {
        let span = match &error {
            ConfigError::TooManyRules { max, .. } => rules.get(*max).map(|r| r.paren.span.join()),
            _ => None,
        };
        Error::new(span.unwrap_or(bracket.span.join()), error)
    })?;
    let core = private();
    let rules = built.iter().map(|rule| &rule.tokens);
    Ok(Built {
        value,
        tokens: quote!(#core::Policy::sliding_log([#(#rules),*])?),
    })
}

/// The single rule of a fixed or sliding window (their constructors take one).
fn one_rule(args: &Args, algorithm: &syn::Ident) -> syn::Result<Built<Rule>> {
    let Some(rules) = &args.rules else {
        return Err(Error::new(
            algorithm.span(),
            format!(
                "missing `rules`: {algorithm} needs exactly one rule, like `rules = [(100, 60s)]`"
            ),
        ));
    };
    let RulesLit { bracket, rules } = &rules.value;
    match rules.as_slice() {
        [only] => rule(only),
        _ => Err(Error::new(
            rules
                .get(1)
                .map_or(bracket.span.join(), |extra| extra.paren.span.join()),
            format!("{algorithm} takes exactly one rule, got {}", rules.len()),
        )),
    }
}

/// `Rule::new(limit, window)`.
fn rule(rule: &RuleLit) -> syn::Result<Built<Rule>> {
    let RuleLit {
        paren,
        limit,
        window,
    } = rule;
    let value = Rule::new(limit.value, window.value).map_err(|error| match error {
        ConfigError::ZeroLimit { .. } | ConfigError::TooLarge { .. } => {
            Error::new_spanned(&limit.lit, error)
        }
        ConfigError::ZeroWindow { .. } | ConfigError::WindowTooLong { .. } => {
            Error::new_spanned(&window.written, error)
        }
        _ => Error::new(paren.span.join(), error),
    })?;
    let core = private();
    Ok(Built {
        value,
        tokens: quote!(#core::Rule::new(#limit, #window)?),
    })
}

/// `Rate::new(amount, period)`.
fn rate(rate: &RateLit) -> syn::Result<Built<Rate>> {
    let RateLit { amount, period } = rate;
    let value = Rate::new(amount.value, period.value).map_err(|error| match error {
        ConfigError::ZeroRate { amount: 0, .. } | ConfigError::TooLarge { .. } => {
            Error::new_spanned(&amount.lit, error)
        }
        _ => Error::new_spanned(&period.written, error),
    })?;
    let core = private();
    Ok(Built {
        value,
        tokens: quote!(#core::Rate::new(#amount, #period)?),
    })
}

/// `Policy::token_bucket`, `leaky_bucket` or `gcra`: a rate and a size.
fn build_bucket(
    args: &Args,
    name: &syn::Ident,
    bucket: &Bucket,
    constructor: fn(Rate, u64) -> Result<Policy, ConfigError>,
    constructor_name: TokenStream,
) -> syn::Result<Built<Policy>> {
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
        rate: rate_lit,
        size,
    } = bucket;
    let rate = rate(rate_lit)?;
    let value = constructor(rate.value, size.value).map_err(|error| match error {
        ConfigError::ZeroCapacity { .. } | ConfigError::TooLarge { .. } => {
            Error::new_spanned(&size.lit, error)
        }
        _ => Error::new_spanned(name, error),
    })?;
    let (core, rate) = (private(), rate.tokens);
    Ok(Built {
        value,
        tokens: quote!(#core::Policy::#constructor_name(#rate, #size)?),
    })
}

/// `.with_prevent_duplicate(window)`, when asked for.
fn prevent_duplicate(args: &Args, policy: Built<Policy>) -> syn::Result<Built<Policy>> {
    let Some(prevent) = &args.prevent_duplicate else {
        return Ok(policy);
    };
    let core = private();
    let (window, window_tokens) = match &prevent.value {
        Some(window) => (window.value, window.to_token_stream()),
        None => (
            DEFAULT_DUPLICATE_WINDOW,
            quote!(#core::DEFAULT_DUPLICATE_WINDOW),
        ),
    };
    let value = policy
        .value
        .with_prevent_duplicate(window)
        .map_err(|error| match (&error, &prevent.value) {
            (ConfigError::ZeroWindow { .. } | ConfigError::WindowTooLong { .. }, Some(window)) => {
                Error::new_spanned(&window.written, error)
            }
            (ConfigError::TooManyRules { .. }, _) => Error::new_spanned(
                prevent.keyword,
                format!("{error}: `prevent_duplicate` adds one"),
            ),
            _ => Error::new_spanned(prevent.keyword, error),
        })?;
    let tokens = policy.tokens;
    Ok(Built {
        value,
        tokens: quote!(#tokens.with_prevent_duplicate(#window_tokens)?),
    })
}

/// `.with_cost(cost)`, when given.
fn cost(args: &Args, policy: Built<Policy>) -> syn::Result<Built<Policy>> {
    let Some(cost) = &args.cost else {
        return Ok(policy);
    };
    let cost = &cost.value;
    let value = policy
        .value
        .with_cost(cost.value)
        .map_err(|error| Error::new_spanned(&cost.lit, error))?;
    let tokens = policy.tokens;
    Ok(Built {
        value,
        tokens: quote!(#tokens.with_cost(#cost)?),
    })
}
