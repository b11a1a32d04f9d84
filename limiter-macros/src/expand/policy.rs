//! The code that builds the checked policy at run time: the calls
//! limiter-model accepted while the attribute expanded, with the same
//! values, inside a function returning `Result<_, ConfigError>` so that `?`
//! never fails there (it did not fail here).

use proc_macro2::TokenStream;
use quote::{ToTokens as _, quote};

use crate::check::{Constructor, DuplicateWindow, Hot, Policy};
use crate::expand::tokens::private;
use crate::parse::{Bucket, RuleLit};

/// The expression that builds `policy`.
pub(crate) fn policy(policy: &Policy<'_>) -> TokenStream {
    let core = private();
    let mut tokens = constructor(&policy.constructor);
    if let Some(window) = &policy.prevent_duplicate {
        let window = match window {
            DuplicateWindow::Default => quote!(#core::DEFAULT_DUPLICATE_WINDOW),
            DuplicateWindow::Written(window) => window.to_token_stream(),
        };
        tokens = quote!(#tokens.with_prevent_duplicate(#window)?);
    }
    if let Some(cost) = policy.cost {
        tokens = quote!(#tokens.with_cost(#cost)?);
    }
    match &policy.hot {
        Some(Hot::Lease { max, ttl }) => {
            let ttl = match ttl {
                Some(ttl) => ttl.to_token_stream(),
                None => quote!(#core::DEFAULT_LEASE_TTL),
            };
            quote!(#tokens.with_lease(#core::Lease::new(#max, #ttl)?)?)
        }
        Some(Hot::Shards(count)) => quote!(#tokens.with_shards(#count)?),
        Some(Hot::Sample(every)) => quote!(#tokens.with_sampling(#every)?),
        None => tokens,
    }
}

fn constructor(constructor: &Constructor<'_>) -> TokenStream {
    let core = private();
    match constructor {
        Constructor::SlidingLog(rules) => {
            let rules = rules.iter().map(rule);
            quote!(#core::Policy::sliding_log([#(#rules),*])?)
        }
        Constructor::FixedWindow(only) => {
            let rule = rule(only);
            quote!(#core::Policy::fixed_window(#rule))
        }
        Constructor::SlidingWindow(only) => {
            let rule = rule(only);
            quote!(#core::Policy::sliding_window(#rule))
        }
        Constructor::TokenBucket(written) => bucket(written, quote!(token_bucket)),
        Constructor::LeakyBucket(written) => bucket(written, quote!(leaky_bucket)),
        Constructor::Gcra(written) => bucket(written, quote!(gcra)),
    }
}

/// `Rule::new(limit, window)`.
fn rule(rule: &RuleLit) -> TokenStream {
    let core = private();
    let RuleLit { limit, window, .. } = rule;
    quote!(#core::Rule::new(#limit, #window)?)
}

/// `Policy::token_bucket`, `leaky_bucket` or `gcra`, by `constructor`.
fn bucket(bucket: &Bucket, constructor: TokenStream) -> TokenStream {
    let core = private();
    let Bucket { rate, size } = bucket;
    let (amount, period) = (&rate.amount, &rate.period);
    let rate = quote!(#core::Rate::new(#amount, #period)?);
    quote!(#core::Policy::#constructor(#rate, #size)?)
}
