//! `algorithm = ...`: the algorithm's name, and for the buckets and GCRA
//! their rate and size, as written.

use syn::parse::{Parse, ParseStream};
use syn::{Error, Ident, parenthesized, token};

use crate::parse::syntax::{Arg, parse_arguments, parse_assignment, unknown};
use crate::parse::values::{Int, RateLit};

mod kw {
    syn::custom_keyword!(sliding_log);
    syn::custom_keyword!(fixed_window);
    syn::custom_keyword!(sliding_window);
    syn::custom_keyword!(token_bucket);
    syn::custom_keyword!(leaky_bucket);
    syn::custom_keyword!(gcra);
    syn::custom_keyword!(rate);
    syn::custom_keyword!(burst);
    syn::custom_keyword!(capacity);
}

/// `algorithm = ...`, named by `name` in errors.
pub(crate) struct Algorithm {
    pub(crate) name: Ident,
    pub(crate) kind: AlgorithmKind,
}

pub(crate) enum AlgorithmKind {
    SlidingLog,
    FixedWindow,
    SlidingWindow,
    TokenBucket(Bucket),
    LeakyBucket(Bucket),
    Gcra(Bucket),
}

/// `(rate = 1/s, burst = 10)`: a rate, and the capacity or burst, here
/// called the bucket's size.
pub(crate) struct Bucket {
    pub(crate) rate: RateLit,
    pub(crate) size: Int,
}

/// How a bucket's size is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeName {
    Burst,
    Capacity,
}

impl SizeName {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Burst => "burst",
            Self::Capacity => "capacity",
        }
    }
}

impl Algorithm {
    /// What the bucket's size is called and an example, for the buckets and GCRA.
    pub(crate) fn bucket_syntax(name: &str) -> Option<(SizeName, &'static str)> {
        match name {
            "token_bucket" => Some((SizeName::Burst, "token_bucket(rate = 1/s, burst = 10)")),
            "leaky_bucket" => Some((SizeName::Capacity, "leaky_bucket(rate = 2/s, capacity = 5)")),
            "gcra" => Some((SizeName::Burst, "gcra(rate = 100/60s, burst = 20)")),
            _ => None,
        }
    }
}

impl Parse for Algorithm {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // Every name is peeked, so that the error lists them all.
        let lookahead = input.lookahead1();
        let known = [
            lookahead.peek(kw::sliding_log),
            lookahead.peek(kw::fixed_window),
            lookahead.peek(kw::sliding_window),
            lookahead.peek(kw::token_bucket),
            lookahead.peek(kw::leaky_bucket),
            lookahead.peek(kw::gcra),
        ];
        if !known.contains(&true) {
            return Err(unknown(input, lookahead, "algorithm"));
        }
        let name: Ident = input.parse()?;
        let kind = match name.to_string().as_str() {
            "sliding_log" => AlgorithmKind::SlidingLog,
            "fixed_window" => AlgorithmKind::FixedWindow,
            "sliding_window" => AlgorithmKind::SlidingWindow,
            "token_bucket" => AlgorithmKind::TokenBucket(Bucket::parse(input, &name)?),
            "leaky_bucket" => AlgorithmKind::LeakyBucket(Bucket::parse(input, &name)?),
            _ => AlgorithmKind::Gcra(Bucket::parse(input, &name)?),
        };
        Ok(Self { name, kind })
    }
}

impl Bucket {
    fn parse(input: ParseStream<'_>, name: &Ident) -> syn::Result<Self> {
        let algorithm = name.to_string();
        let (size_name, example) = Algorithm::bucket_syntax(&algorithm).expect("a bucket or GCRA");
        let needs = || {
            Error::new(
                name.span(),
                format!(
                    "{algorithm} needs `rate` and `{}`, like `{example}`",
                    size_name.as_str()
                ),
            )
        };
        if !input.peek(token::Paren) {
            return Err(needs());
        }
        let content;
        parenthesized!(content in input);
        let mut rate: Option<Arg<kw::rate, RateLit>> = None;
        let mut burst: Option<Arg<kw::burst, Int>> = None;
        let mut capacity: Option<Arg<kw::capacity, Int>> = None;
        let what = format!("{algorithm} argument");
        parse_arguments(&content, &what, |input, lookahead| {
            if lookahead.peek(kw::rate) {
                parse_assignment(input, &mut rate, RateLit::parse)?;
            } else if size_name == SizeName::Burst && lookahead.peek(kw::burst) {
                parse_assignment(input, &mut burst, |input| Int::parse(input, "the burst"))?;
            } else if size_name == SizeName::Capacity && lookahead.peek(kw::capacity) {
                parse_assignment(input, &mut capacity, |input| {
                    Int::parse(input, "the capacity")
                })?;
            } else {
                return Ok(false);
            }
            Ok(true)
        })?;
        let size = burst.map(|arg| arg.value).or(capacity.map(|arg| arg.value));
        match (rate, size) {
            (Some(rate), Some(size)) => Ok(Self {
                rate: rate.value,
                size,
            }),
            _ => Err(needs()),
        }
    }
}
