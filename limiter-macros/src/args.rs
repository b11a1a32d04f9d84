//! The arguments of `#[rate_limit(...)]` as written.
//!
//! Parsing checks the syntax only; whether the numbers make a policy is
//! limiter-core's to say (`policy.rs`).

use syn::parse::{Parse, ParseStream};
use syn::{Error, Ident, LitStr, Path, parenthesized, token};

use crate::attr_parsing::{Arg, parse_arguments, parse_assignment, parse_optional_assignment};
use crate::business::BusinessArgs;
use crate::values::{DurationLit, Int, RateLit, RulesLit, parse_header_name, parse_key_prefix};

pub(crate) mod kw {
    // Arguments.
    syn::custom_keyword!(rules);
    syn::custom_keyword!(by);
    syn::custom_keyword!(prevent_duplicate);
    syn::custom_keyword!(key);
    syn::custom_keyword!(message);
    syn::custom_keyword!(cost);
    syn::custom_keyword!(algorithm);
    syn::custom_keyword!(on_store_error);
    // `by` values.
    syn::custom_keyword!(ip);
    syn::custom_keyword!(user);
    syn::custom_keyword!(global);
    syn::custom_keyword!(header);
    syn::custom_keyword!(custom);
    // Algorithms and their arguments.
    syn::custom_keyword!(sliding_log);
    syn::custom_keyword!(fixed_window);
    syn::custom_keyword!(sliding_window);
    syn::custom_keyword!(token_bucket);
    syn::custom_keyword!(leaky_bucket);
    syn::custom_keyword!(gcra);
    syn::custom_keyword!(rate);
    syn::custom_keyword!(burst);
    syn::custom_keyword!(capacity);
    // Failure policies.
    syn::custom_keyword!(fallback);
    syn::custom_keyword!(fail_open);
    syn::custom_keyword!(fail_closed);
    syn::custom_keyword!(instances);
}

/// Every argument, each at most once, in any order.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) rules: Option<Arg<kw::rules, RulesLit>>,
    pub(crate) by: Option<Arg<kw::by, By>>,
    /// Without a value: limiter-core's default window.
    pub(crate) prevent_duplicate: Option<Arg<kw::prevent_duplicate, Option<DurationLit>>>,
    pub(crate) key: Option<Arg<kw::key, LitStr>>,
    pub(crate) message: Option<Arg<kw::message, LitStr>>,
    pub(crate) cost: Option<Arg<kw::cost, Int>>,
    pub(crate) algorithm: Option<Arg<kw::algorithm, Algorithm>>,
    pub(crate) on_store_error: Option<Arg<kw::on_store_error, OnStoreError>>,
    /// `lease`, `shards`, `sample` (`hot.rs`).
    pub(crate) hot: crate::hot::HotArgs,
    /// `plans`, `allow`, `shadow`, `wait`, `concurrency`, `cost = path`...
    pub(crate) business: BusinessArgs,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Self::default();
        parse_arguments(input, "argument", |input, lookahead| {
            if args.business.parse_cost_function(input)? {
                return Ok(true);
            }
            if lookahead.peek(kw::rules) {
                parse_assignment(input, &mut args.rules, RulesLit::parse)?;
            } else if lookahead.peek(kw::by) {
                parse_assignment(input, &mut args.by, By::parse)?;
            } else if lookahead.peek(kw::prevent_duplicate) {
                parse_optional_assignment(input, &mut args.prevent_duplicate, |input| {
                    DurationLit::parse(input, "the prevent_duplicate window")
                })?;
            } else if lookahead.peek(kw::key) {
                parse_assignment(input, &mut args.key, parse_key_prefix)?;
            } else if lookahead.peek(kw::message) {
                parse_assignment(input, &mut args.message, |input| input.parse())?;
            } else if lookahead.peek(kw::cost) {
                parse_assignment(input, &mut args.cost, |input| {
                    Int::parse(input, "the cost of a request")
                })?;
            } else if lookahead.peek(kw::algorithm) {
                parse_assignment(input, &mut args.algorithm, Algorithm::parse)?;
            } else if lookahead.peek(kw::on_store_error) {
                parse_assignment(input, &mut args.on_store_error, OnStoreError::parse)?;
            } else if !args.hot.parse_argument(input, lookahead)? {
                return args.business.parse(input, lookahead);
            }
            Ok(true)
        })?;
        Ok(args)
    }
}

/// `by = ...`: whose requests share a limit.
pub(crate) enum By {
    Ip,
    User,
    Global,
    Header(LitStr),
    Custom(Path),
}

impl Parse for By {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::ip) {
            input.parse::<kw::ip>()?;
            Ok(Self::Ip)
        } else if lookahead.peek(kw::user) {
            input.parse::<kw::user>()?;
            Ok(Self::User)
        } else if lookahead.peek(kw::global) {
            input.parse::<kw::global>()?;
            Ok(Self::Global)
        } else if lookahead.peek(kw::header) {
            input.parse::<kw::header>()?;
            let content;
            parenthesized!(content in input);
            let name = parse_header_name(&content)?;
            expect_end(
                &content,
                "expected one header name, like `header(\"x-api-key\")`",
            )?;
            Ok(Self::Header(name))
        } else if lookahead.peek(kw::custom) {
            input.parse::<kw::custom>()?;
            let content;
            parenthesized!(content in input);
            let path = content.parse()?;
            expect_end(
                &content,
                "expected the path of a function, like `custom(keys::api_key)`",
            )?;
            Ok(Self::Custom(path))
        } else {
            Err(crate::attr_parsing::unknown(input, lookahead, "`by` value"))
        }
    }
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
            return Err(crate::attr_parsing::unknown(input, lookahead, "algorithm"));
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

/// `on_store_error = ...`.
pub(crate) enum OnStoreError {
    /// `fallback`, `fallback(instances = N)`.
    Fallback(u32),
    FailOpen,
    FailClosed,
}

impl Parse for OnStoreError {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::fallback) {
            input.parse::<kw::fallback>()?;
            if !input.peek(token::Paren) {
                return Ok(Self::Fallback(1));
            }
            let content;
            parenthesized!(content in input);
            let mut instances: Option<Arg<kw::instances, Int>> = None;
            parse_arguments(&content, "fallback argument", |input, lookahead| {
                if !lookahead.peek(kw::instances) {
                    return Ok(false);
                }
                parse_assignment(input, &mut instances, |input| {
                    Int::parse(input, "the number of instances")
                })?;
                Ok(true)
            })?;
            let Some(Arg { value: count, .. }) = instances else {
                return Ok(Self::Fallback(1));
            };
            // `OnStoreError::Fallback` counts instances in a `u32`, from 1.
            match u32::try_from(count.value) {
                Ok(0) => Err(Error::new_spanned(
                    &count.lit,
                    "the number of instances must be at least 1, got 0",
                )),
                Ok(instances) => Ok(Self::Fallback(instances)),
                Err(_) => Err(Error::new_spanned(
                    &count.lit,
                    "the number of instances must fit in a u32",
                )),
            }
        } else if lookahead.peek(kw::fail_open) {
            input.parse::<kw::fail_open>()?;
            Ok(Self::FailOpen)
        } else if lookahead.peek(kw::fail_closed) {
            input.parse::<kw::fail_closed>()?;
            Ok(Self::FailClosed)
        } else {
            Err(crate::attr_parsing::unknown(
                input,
                lookahead,
                "failure policy",
            ))
        }
    }
}

fn expect_end(input: ParseStream<'_>, message: &str) -> syn::Result<()> {
    if input.is_empty() {
        Ok(())
    } else {
        Err(input.error(message))
    }
}
