//! The hot-key arguments: `lease = 50` or `lease(max = 50, ttl = 100ms)`,
//! `shards = 3`, `sample = 10` (at most one of them). Parsed here and built
//! through limiter-core's `Lease::new`, `Policy::with_lease`,
//! `with_shards` and `with_sampling`, whose errors become compile errors.

use limiter_core::{ConfigError, DEFAULT_LEASE_TTL, Lease, Policy};
use quote::{ToTokens, quote};
use syn::parse::{Lookahead1, ParseStream};
use syn::{Error, Token, parenthesized};

use crate::attr_parsing::{Arg, parse_arguments};
use crate::generate::private;
use crate::policy::Built;
use crate::values::{DurationLit, Int};

pub(crate) mod kw {
    syn::custom_keyword!(lease);
    syn::custom_keyword!(shards);
    syn::custom_keyword!(sample);
    syn::custom_keyword!(max);
    syn::custom_keyword!(ttl);
}

/// `lease`: its size, and its length unless the default.
pub(crate) struct LeaseLit {
    max: Int,
    ttl: Option<DurationLit>,
}

/// The hot-key arguments as written.
#[derive(Default)]
pub(crate) struct HotArgs {
    lease: Option<Arg<kw::lease, LeaseLit>>,
    shards: Option<Arg<kw::shards, Int>>,
    sample: Option<Arg<kw::sample, Int>>,
}

impl HotArgs {
    /// Parses one hot-key argument when the lookahead sees one; `false`
    /// otherwise (the lookahead then lists these names too).
    pub(crate) fn parse_argument(
        &mut self,
        input: ParseStream<'_>,
        lookahead: &Lookahead1<'_>,
    ) -> syn::Result<bool> {
        if lookahead.peek(kw::lease) {
            let keyword: kw::lease = input.parse()?;
            unset(&self.lease, &keyword)?;
            let value = parse_lease(input)?;
            self.lease = Some(Arg { keyword, value });
        } else if lookahead.peek(kw::shards) {
            let keyword: kw::shards = input.parse()?;
            unset(&self.shards, &keyword)?;
            input.parse::<Token![=]>()?;
            let value = Int::parse(input, "the number of shards")?;
            self.shards = Some(Arg { keyword, value });
        } else if lookahead.peek(kw::sample) {
            let keyword: kw::sample = input.parse()?;
            unset(&self.sample, &keyword)?;
            input.parse::<Token![=]>()?;
            let value = Int::parse(input, "how many requests one sample stands for")?;
            self.sample = Some(Arg { keyword, value });
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// The policy with its hot-key mode, built through limiter-core.
    pub(crate) fn apply(&self, policy: Built<Policy>) -> syn::Result<Built<Policy>> {
        let core = private();
        let given = [
            self.lease.as_ref().map(|a| a.keyword.to_token_stream()),
            self.shards.as_ref().map(|a| a.keyword.to_token_stream()),
            self.sample.as_ref().map(|a| a.keyword.to_token_stream()),
        ];
        if let [_, second, ..] = given.iter().flatten().collect::<Vec<_>>()[..] {
            return Err(Error::new_spanned(
                second,
                "`lease`, `shards` and `sample` exclude each other: choose one hot-key mode",
            ));
        }
        let Built { value, tokens } = policy;
        if let Some(lease) = &self.lease {
            let LeaseLit { max, ttl } = &lease.value;
            let length = ttl.as_ref().map_or(DEFAULT_LEASE_TTL, |ttl| ttl.value);
            let built = Lease::new(max.value, length).map_err(|error| match (&error, ttl) {
                (ConfigError::InvalidHotKey { reason, .. }, Some(ttl))
                    if reason.contains("lasts") =>
                {
                    Error::new_spanned(&ttl.written, error)
                }
                _ => Error::new_spanned(&max.lit, error),
            })?;
            let value = value
                .with_lease(built)
                .map_err(|error| Error::new_spanned(lease.keyword, error))?;
            let ttl = match ttl {
                Some(ttl) => ttl.to_token_stream(),
                None => quote!(#core::DEFAULT_LEASE_TTL),
            };
            return Ok(Built {
                value,
                tokens: quote!(#tokens.with_lease(#core::Lease::new(#max, #ttl)?)?),
            });
        }
        if let Some(shards) = &self.shards {
            let count = u32_of(&shards.value)?;
            let value = value
                .with_shards(count)
                .map_err(|error| Error::new_spanned(&shards.value.lit, error))?;
            let count = &shards.value;
            return Ok(Built {
                value,
                tokens: quote!(#tokens.with_shards(#count)?),
            });
        }
        if let Some(sample) = &self.sample {
            let every = u32_of(&sample.value)?;
            let value = value
                .with_sampling(every)
                .map_err(|error| Error::new_spanned(&sample.value.lit, error))?;
            let every = &sample.value;
            return Ok(Built {
                value,
                tokens: quote!(#tokens.with_sampling(#every)?),
            });
        }
        Ok(Built { value, tokens })
    }
}

/// `= 50`, or `(max = 50, ttl = 100ms)`.
fn parse_lease(input: ParseStream<'_>) -> syn::Result<LeaseLit> {
    if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        let max = Int::parse(input, "the most permits of a lease")?;
        return Ok(LeaseLit { max, ttl: None });
    }
    if !input.peek(syn::token::Paren) {
        return Err(input.error("expected `lease = 50` or `lease(max = 50, ttl = 100ms)`"));
    }
    let content;
    let paren = parenthesized!(content in input);
    let (mut max, mut ttl) = (None, None);
    parse_arguments(&content, "lease argument", |input, lookahead| {
        if lookahead.peek(kw::max) {
            let keyword: kw::max = input.parse()?;
            unset(&max, &keyword)?;
            input.parse::<Token![=]>()?;
            max = Some(Int::parse(input, "the most permits of a lease")?);
        } else if lookahead.peek(kw::ttl) {
            let keyword: kw::ttl = input.parse()?;
            unset(&ttl, &keyword)?;
            input.parse::<Token![=]>()?;
            ttl = Some(DurationLit::parse(input, "the length of a lease")?);
        } else {
            return Ok(false);
        }
        Ok(true)
    })?;
    let max = max.ok_or_else(|| {
        Error::new(
            paren.span.join(),
            "missing `max`: how many permits a lease takes, like `lease(max = 50, ttl = 100ms)`",
        )
    })?;
    Ok(LeaseLit { max, ttl })
}

fn u32_of(int: &Int) -> syn::Result<u32> {
    u32::try_from(int.value)
        .map_err(|_| Error::new_spanned(&int.lit, format!("`{}` is too large", int.value)))
}

fn unset<T>(slot: &Option<T>, keyword: &impl ToTokens) -> syn::Result<()> {
    match slot {
        Some(_) => Err(Error::new_spanned(
            keyword,
            format!("duplicate argument `{}`", keyword.to_token_stream()),
        )),
        None => Ok(()),
    }
}
