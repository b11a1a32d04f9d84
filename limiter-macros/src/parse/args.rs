//! The arguments of `#[rate_limit(...)]` as written.
//!
//! Parsing checks the syntax only; whether the numbers make a policy is
//! limiter-model's to say (`check::policy`).

use syn::parse::{Parse, ParseStream};
use syn::{Error, LitStr, Path, parenthesized, token};

use crate::parse::algorithm::Algorithm;
use crate::parse::business::{self, BusinessArgs};
use crate::parse::hot::HotArgs;
use crate::parse::syntax::{
    Arg, parse_arguments, parse_assignment, parse_optional_assignment, unknown,
};
use crate::parse::values::{DurationLit, Int, RulesLit, parse_header_name, parse_key_prefix};

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
    syn::custom_keyword!(user_or_ip);
    syn::custom_keyword!(global);
    syn::custom_keyword!(header);
    syn::custom_keyword!(custom);
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
    /// Without a value: limiter-model's default window.
    pub(crate) prevent_duplicate: Option<Arg<kw::prevent_duplicate, Option<DurationLit>>>,
    pub(crate) key: Option<Arg<kw::key, LitStr>>,
    pub(crate) message: Option<Arg<kw::message, LitStr>>,
    pub(crate) cost: Option<Arg<kw::cost, Int>>,
    pub(crate) algorithm: Option<Arg<kw::algorithm, Algorithm>>,
    pub(crate) on_store_error: Option<Arg<kw::on_store_error, OnStoreError>>,
    /// `lease`, `shards`, `sample` (`hot.rs`).
    pub(crate) hot: HotArgs,
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

impl Args {
    /// The concurrency limit, when it is the handler's only limit: no rate
    /// limit is asked for.
    pub(crate) fn concurrency_alone(&self) -> Option<&Arg<business::kw::concurrency, Int>> {
        let business = &self.business;
        let rate_limited = self.rules.is_some()
            || self.algorithm.is_some()
            || self.prevent_duplicate.is_some()
            || self.cost.is_some()
            || business.cost.is_some()
            || business.plans.is_some();
        business.concurrency.as_ref().filter(|_| !rate_limited)
    }
}

/// `by = ...`: whose requests share a limit.
pub(crate) enum By {
    Ip,
    User,
    UserOrIp,
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
        } else if lookahead.peek(kw::user_or_ip) {
            input.parse::<kw::user_or_ip>()?;
            Ok(Self::UserOrIp)
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
            Err(unknown(input, lookahead, "`by` value"))
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
            Err(unknown(input, lookahead, "failure policy"))
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
