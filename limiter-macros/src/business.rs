//! The arguments that make a handler's limit follow the business: `plans`,
//! `allow`, `allow_identities`, `deny`, `deny_identities`, `shadow`,
//! `wait`, `wait_when`, `concurrency`, `cost = path`, `penalty(..)`,
//! `count_when = path` and `count_failures`. Parsed beside the others, checked
//! through limiter-core (`ConcurrencyLimit::new`, `MaxWait::new`), and
//! generated as `LimitLayer` setter calls.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use limiter_core::{ConcurrencyLimit, ConfigError, MaxWait};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::{Lookahead1, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::{Error, LitInt, LitStr, Path, Token, bracketed};

use crate::args::Args;
use crate::attr_parsing::{Arg, parse_assignment};
use crate::generate::private;
use crate::values::{DurationLit, Int};

mod kw {
    syn::custom_keyword!(plans);
    syn::custom_keyword!(allow);
    syn::custom_keyword!(allow_identities);
    syn::custom_keyword!(deny);
    syn::custom_keyword!(deny_identities);
    syn::custom_keyword!(shadow);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(wait_when);
    syn::custom_keyword!(concurrency);
    syn::custom_keyword!(cost);
    syn::custom_keyword!(count_when);
    syn::custom_keyword!(count_failures);
}

/// The business arguments as written, each at most once.
#[derive(Default)]
pub(crate) struct BusinessArgs {
    plans: Option<Arg<kw::plans, Path>>,
    allow: Option<Arg<kw::allow, Vec<LitStr>>>,
    allow_identities: Option<Arg<kw::allow_identities, Vec<LitStr>>>,
    deny: Option<Arg<kw::deny, Vec<LitStr>>>,
    deny_identities: Option<Arg<kw::deny_identities, Vec<LitStr>>>,
    shadow: Option<kw::shadow>,
    wait: Option<Arg<kw::wait, DurationLit>>,
    wait_when: Option<Arg<kw::wait_when, Path>>,
    concurrency: Option<Arg<kw::concurrency, Int>>,
    /// `cost = path::to::fn` (a constant cost is the policy's).
    cost: Option<Arg<kw::cost, Path>>,
    penalty: Option<Arg<crate::penalty::kw::penalty, crate::penalty::PenaltyLit>>,
    /// `count_when = path::to::fn`: which responses count.
    count_when: Option<Arg<kw::count_when, Path>>,
    /// `count_failures`: only responses of status 400 or more count.
    count_failures: Option<kw::count_failures>,
}

impl BusinessArgs {
    /// Parses `cost = path::to::fn` when `input` starts with it (before
    /// the other arguments: `cost = 10` is the policy's), without asking
    /// the lookahead, which lists `cost` once already.
    pub(crate) fn parse_cost_function(&mut self, input: ParseStream<'_>) -> syn::Result<bool> {
        if input.peek(kw::cost) && input.peek2(Token![=]) && !input.peek3(LitInt) {
            parse_assignment(input, &mut self.cost, |input| input.parse())?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Parses one business argument when `input` starts with one; `false`
    /// otherwise (the lookahead then lists these names too).
    pub(crate) fn parse(
        &mut self,
        input: ParseStream<'_>,
        lookahead: &Lookahead1<'_>,
    ) -> syn::Result<bool> {
        if lookahead.peek(kw::plans) {
            parse_assignment(input, &mut self.plans, |input| input.parse())?;
        } else if lookahead.peek(kw::allow_identities) {
            parse_assignment(input, &mut self.allow_identities, parse_strings)?;
        } else if lookahead.peek(kw::allow) {
            parse_assignment(input, &mut self.allow, parse_strings)?;
        } else if lookahead.peek(kw::deny_identities) {
            parse_assignment(input, &mut self.deny_identities, parse_strings)?;
        } else if lookahead.peek(kw::deny) {
            parse_assignment(input, &mut self.deny, parse_strings)?;
        } else if lookahead.peek(kw::shadow) {
            let keyword: kw::shadow = input.parse()?;
            if self.shadow.is_some() {
                return Err(Error::new_spanned(keyword, "duplicate argument `shadow`"));
            }
            self.shadow = Some(keyword);
        } else if lookahead.peek(kw::wait_when) {
            parse_assignment(input, &mut self.wait_when, |input| input.parse())?;
        } else if lookahead.peek(kw::wait) {
            parse_assignment(input, &mut self.wait, |input| {
                DurationLit::parse(input, "the longest wait")
            })?;
        } else if lookahead.peek(kw::concurrency) {
            parse_assignment(input, &mut self.concurrency, |input| {
                Int::parse(input, "the number of requests in flight")
            })?;
        } else if lookahead.peek(kw::count_when) {
            parse_assignment(input, &mut self.count_when, |input| input.parse())?;
        } else if lookahead.peek(kw::count_failures) {
            let keyword: kw::count_failures = input.parse()?;
            if self.count_failures.is_some() {
                return Err(Error::new_spanned(
                    keyword,
                    "duplicate argument `count_failures`",
                ));
            }
            self.count_failures = Some(keyword);
        } else if lookahead.peek(crate::penalty::kw::penalty) {
            let keyword: crate::penalty::kw::penalty = input.parse()?;
            if self.penalty.is_some() {
                return Err(Error::new_spanned(keyword, "duplicate argument `penalty`"));
            }
            let value = crate::penalty::PenaltyLit::parse(input)?;
            self.penalty = Some(Arg { keyword, value });
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Where counting by outcome is asked for (`count_when`,
    /// `count_failures`), if it is.
    fn counting(&self) -> Option<proc_macro2::Span> {
        self.count_when
            .as_ref()
            .map(|when| when.keyword.span())
            .or(self.count_failures.map(|failures| failures.span()))
    }

    /// Whether the handler has a concurrency limit and no rate limit.
    pub(crate) fn concurrency_only(args: &Args) -> bool {
        args.business.concurrency.is_some()
            && args.rules.is_none()
            && args.algorithm.is_none()
            && args.prevent_duplicate.is_none()
            && args.cost.is_none()
            && args.business.cost.is_none()
            && args.business.plans.is_none()
    }
}

/// The checked business arguments: the setter calls on the handler's
/// `LimitLayer`, and for a concurrency limit alone its constructor.
pub(crate) struct Business {
    pub(crate) calls: TokenStream,
    /// `LimitLayer::concurrent(..)`'s limit, when there is no rate limit.
    pub(crate) concurrency_only: Option<TokenStream>,
    /// Which responses count, as the argument of
    /// `LimitLayer::count_when`, when only some do.
    pub(crate) count_when: Option<TokenStream>,
}

/// Refuses counting by outcome (`count_when`, `count_failures`) with a
/// policy whose algorithm cannot give a request back, through
/// limiter-core's own check.
pub(crate) fn check_counting(args: &Args, policy: &limiter_core::Policy) -> syn::Result<()> {
    let Some(keyword) = args.business.counting() else {
        return Ok(());
    };
    policy
        .counts_by_outcome()
        .map_err(|error| Error::new(keyword, error))
}

/// `count_when`'s argument, when only some responses count.
fn count_when(args: &Args, errors: &mut Vec<Error>) -> Option<TokenStream> {
    let business = &args.business;
    let core = private();
    let keyword = business.counting()?;
    if let (Some(_), Some(failures)) = (&business.count_when, &business.count_failures) {
        errors.push(Error::new_spanned(
            failures,
            "`count_failures` is a `count_when`: give one of them",
        ));
        return None;
    }
    if BusinessArgs::concurrency_only(args) {
        errors.push(Error::new(
            keyword,
            "counting by outcome gives back a rate limit's requests: add `rules = [...]`",
        ));
        return None;
    }
    Some(match &business.count_when {
        Some(when) => {
            let path = &when.value;
            quote_spanned! {path.span()=>
                {
                    let counts: fn(#core::http::StatusCode, &#core::http::HeaderMap) -> bool = #path;
                    counts
                }
            }
        }
        None => quote!(#core::counts_failures),
    })
}

/// Checks `args`' business arguments through limiter-core, reporting every
/// mistake on its token.
pub(crate) fn build(args: &Args) -> syn::Result<Business> {
    let business = &args.business;
    let core = private();
    let mut calls = TokenStream::new();
    let mut errors = Vec::new();
    if let (Some(cost), Some(_)) = (&business.cost, &args.cost) {
        errors.push(Error::new_spanned(
            cost.keyword,
            "duplicate argument `cost`",
        ));
    }
    if let Some(plans) = &business.plans {
        let path = &plans.value;
        calls.extend(quote_spanned! {path.span()=>
            .plans({
                let plan_of: fn(&#core::http::request::Parts) -> ::core::option::Option<#core::Plan> = #path;
                plan_of
            })
        });
    }
    if let Some(cost) = &business.cost {
        let path = &cost.value;
        calls.extend(quote_spanned! {path.span()=>
            .cost({
                let cost_of: fn(&#core::http::request::Parts) -> u64 = #path;
                cost_of
            })
        });
    }
    if let Some(allow) = &business.allow {
        let nets = allow
            .value
            .iter()
            .filter_map(|text| match parse_net(&text.value()) {
                Ok(_) => Some(quote!(#core::listed_net(#text))),
                Err(why) => {
                    errors.push(Error::new_spanned(text, why));
                    None
                }
            });
        let nets: Vec<_> = nets.collect();
        calls.extend(quote!(.allow_ips([#(#nets),*])));
    }
    if let Some(identities) = &business.allow_identities {
        let identities = &identities.value;
        calls.extend(quote!(.allow_identities([#(#identities),*])));
    }
    if let Some(deny) = &business.deny {
        let nets = deny
            .value
            .iter()
            .filter_map(|text| match parse_net(&text.value()) {
                Ok(_) => Some(quote!(#core::listed_net(#text))),
                Err(why) => {
                    errors.push(Error::new_spanned(text, why));
                    None
                }
            });
        let nets: Vec<_> = nets.collect();
        calls.extend(quote!(.deny_ips([#(#nets),*])));
    }
    if let Some(identities) = &business.deny_identities {
        let identities = &identities.value;
        calls.extend(quote!(.deny_identities([#(#identities),*])));
    }
    if business.shadow.is_some() {
        calls.extend(quote!(.shadow(true)));
    }
    if let Some(penalty) = &business.penalty {
        let global = matches!(
            args.by.as_ref().map(|b| &b.value),
            Some(crate::args::By::Global)
        );
        if global {
            errors.push(Error::new_spanned(
                penalty.keyword,
                "a penalty blocks an identity, and `by = global` has none",
            ));
        } else if BusinessArgs::concurrency_only(args) {
            errors.push(Error::new_spanned(
                penalty.keyword,
                "a penalty counts a rate limit's denials: add `rules = [...]`",
            ));
        } else {
            match penalty.value.call() {
                Ok(call) => calls.extend(call),
                Err(error) => errors.push(error),
            }
        }
    }
    match (&business.wait, &business.wait_when) {
        (Some(wait), _) => match MaxWait::new(wait.value.value) {
            Ok(_) => {
                let max = &wait.value;
                calls.extend(quote!(.wait(#core::proven(#core::MaxWait::new(#max)))));
            }
            Err(error) => errors.push(Error::new_spanned(&wait.value.written, error)),
        },
        (None, Some(when)) => errors.push(Error::new_spanned(
            when.keyword,
            "`wait_when` chooses which requests wait: it needs `wait = ...`, the longest wait",
        )),
        (None, None) => {}
    }
    if let (Some(_), Some(when)) = (&business.wait, &business.wait_when) {
        let path = &when.value;
        calls.extend(quote_spanned! {path.span()=>
            .wait_when({
                let waits: fn(&#core::http::request::Parts) -> bool = #path;
                waits
            })
        });
    }
    let count_when = count_when(args, &mut errors);
    let mut concurrency_only = None;
    if let Some(concurrency) = &business.concurrency {
        let max = &concurrency.value;
        match ConcurrencyLimit::new(max.value) {
            Ok(_) => {
                let limit = quote!(#core::proven(#core::ConcurrencyLimit::new(#max)));
                if BusinessArgs::concurrency_only(args) {
                    concurrency_only = Some(limit);
                } else {
                    calls.extend(quote!(.concurrency(#limit)));
                }
            }
            Err(error @ (ConfigError::ZeroConcurrency | ConfigError::TooLarge { .. })) => {
                errors.push(Error::new_spanned(&max.lit, error));
            }
            Err(error) => errors.push(Error::new_spanned(concurrency.keyword, error)),
        }
    }
    match crate::attr_parsing::combine(errors) {
        Some(error) => Err(error),
        None => Ok(Business {
            calls,
            concurrency_only,
            count_when,
        }),
    }
}

/// `["...", ...]`.
fn parse_strings(input: ParseStream<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    bracketed!(content in input);
    let list = Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?;
    Ok(list.into_iter().collect())
}

/// A network in CIDR notation, or a single address.
fn parse_net(text: &str) -> Result<IpNet, String> {
    IpNet::from_str(text)
        .or_else(|_| IpAddr::from_str(text).map(IpNet::from))
        .map_err(|_| format!("{text:?} is not an IP network (like \"10.0.0.0/8\") nor an address"))
}
