//! The arguments that make a handler's limit follow the business, as
//! written: `plans`, `allow`, `allow_identities`, `deny`, `deny_identities`,
//! `shadow`, `wait`, `wait_when`, `concurrency`, `cost = path`, `penalty(..)`,
//! `count_when = path` and `count_failures`. Parsed beside the others; what
//! they mean together is checked in `check::business`.

use proc_macro2::Span;
use syn::parse::{Lookahead1, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::{LitInt, LitStr, Path, Token, bracketed};

use crate::parse::penalty::{self, PenaltyLit};
use crate::parse::syntax::{Arg, ensure_unset, parse_assignment};
use crate::parse::values::{DurationLit, Int};

pub(crate) mod kw {
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
    pub(crate) plans: Option<Arg<kw::plans, Path>>,
    pub(crate) allow: Option<Arg<kw::allow, Vec<LitStr>>>,
    pub(crate) allow_identities: Option<Arg<kw::allow_identities, Vec<LitStr>>>,
    pub(crate) deny: Option<Arg<kw::deny, Vec<LitStr>>>,
    pub(crate) deny_identities: Option<Arg<kw::deny_identities, Vec<LitStr>>>,
    pub(crate) shadow: Option<kw::shadow>,
    pub(crate) wait: Option<Arg<kw::wait, DurationLit>>,
    pub(crate) wait_when: Option<Arg<kw::wait_when, Path>>,
    pub(crate) concurrency: Option<Arg<kw::concurrency, Int>>,
    /// `cost = path::to::fn` (a constant cost is the policy's).
    pub(crate) cost: Option<Arg<kw::cost, Path>>,
    pub(crate) penalty: Option<Arg<penalty::kw::penalty, PenaltyLit>>,
    /// `count_when = path::to::fn`: which responses count.
    pub(crate) count_when: Option<Arg<kw::count_when, Path>>,
    /// `count_failures`: only responses of status 400 or more count.
    pub(crate) count_failures: Option<kw::count_failures>,
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
            ensure_unset(&self.shadow, &keyword)?;
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
            ensure_unset(&self.count_failures, &keyword)?;
            self.count_failures = Some(keyword);
        } else if lookahead.peek(penalty::kw::penalty) {
            let keyword: penalty::kw::penalty = input.parse()?;
            ensure_unset(&self.penalty, &keyword)?;
            let value = PenaltyLit::parse(input)?;
            self.penalty = Some(Arg { keyword, value });
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Where counting by outcome is asked for (`count_when`,
    /// `count_failures`), if it is.
    pub(crate) fn counting(&self) -> Option<Span> {
        self.count_when
            .as_ref()
            .map(|when| when.keyword.span())
            .or(self.count_failures.map(|failures| failures.span()))
    }
}

/// `["...", ...]`.
fn parse_strings(input: ParseStream<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    bracketed!(content in input);
    let list = Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?;
    Ok(list.into_iter().collect())
}
