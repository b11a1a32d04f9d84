//! The hot-key arguments as written: `lease = 50` or
//! `lease(max = 50, ttl = 100ms)`, `shards = 3`, `sample = 10`. That only
//! one is given, and their numbers, are checked through limiter-model
//! (`check::hot`).

use syn::parse::{Lookahead1, ParseStream};
use syn::{Error, Token, parenthesized};

use crate::parse::syntax::{Arg, ensure_unset, parse_arguments};
use crate::parse::values::{DurationLit, Int};

pub(crate) mod kw {
    syn::custom_keyword!(lease);
    syn::custom_keyword!(shards);
    syn::custom_keyword!(sample);
    syn::custom_keyword!(max);
    syn::custom_keyword!(ttl);
}

/// `lease`: its size, and its length unless the default.
pub(crate) struct LeaseLit {
    pub(crate) max: Int,
    pub(crate) ttl: Option<DurationLit>,
}

/// The hot-key arguments as written.
#[derive(Default)]
pub(crate) struct HotArgs {
    pub(crate) lease: Option<Arg<kw::lease, LeaseLit>>,
    pub(crate) shards: Option<Arg<kw::shards, Int>>,
    pub(crate) sample: Option<Arg<kw::sample, Int>>,
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
            ensure_unset(&self.lease, &keyword)?;
            let value = parse_lease(input)?;
            self.lease = Some(Arg { keyword, value });
        } else if lookahead.peek(kw::shards) {
            let keyword: kw::shards = input.parse()?;
            ensure_unset(&self.shards, &keyword)?;
            input.parse::<Token![=]>()?;
            let value = Int::parse(input, "the number of shards")?;
            self.shards = Some(Arg { keyword, value });
        } else if lookahead.peek(kw::sample) {
            let keyword: kw::sample = input.parse()?;
            ensure_unset(&self.sample, &keyword)?;
            input.parse::<Token![=]>()?;
            let value = Int::parse(input, "how many requests one sample stands for")?;
            self.sample = Some(Arg { keyword, value });
        } else {
            return Ok(false);
        }
        Ok(true)
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
            ensure_unset(&max, &keyword)?;
            input.parse::<Token![=]>()?;
            max = Some(Int::parse(input, "the most permits of a lease")?);
        } else if lookahead.peek(kw::ttl) {
            let keyword: kw::ttl = input.parse()?;
            ensure_unset(&ttl, &keyword)?;
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
