//! `penalty(after = 3, within = 10m, block = [15m, 1h])` (or `block = 15m`):
//! denials that earn blocks, as written. limiter-model's `Penalty::new`
//! judges the numbers (`check::business`).

use proc_macro2::Span;
use syn::parse::ParseStream;
use syn::{Error, Token, bracketed, parenthesized};

use crate::parse::syntax::{ensure_unset, parse_arguments};
use crate::parse::values::{DurationLit, Int};

pub(crate) mod kw {
    syn::custom_keyword!(penalty);
    syn::custom_keyword!(after);
    syn::custom_keyword!(within);
    syn::custom_keyword!(block);
}

/// A penalty as written.
pub(crate) struct PenaltyLit {
    pub(crate) after: Int,
    pub(crate) within: DurationLit,
    pub(crate) blocks: Vec<DurationLit>,
    /// The parentheses, where limiter-model's refusal points.
    pub(crate) span: Span,
}

impl PenaltyLit {
    /// `(after = N, within = D, block = D | [D, ...])`, after `penalty`.
    pub(crate) fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if !input.peek(syn::token::Paren) {
            return Err(
                input.error("expected `penalty(after = 3, within = 10m, block = [15m, 1h])`")
            );
        }
        let content;
        let paren = parenthesized!(content in input);
        let (mut after, mut within, mut blocks) = (None, None, None);
        parse_arguments(&content, "penalty argument", |input, lookahead| {
            if lookahead.peek(kw::after) {
                let keyword: kw::after = input.parse()?;
                ensure_unset(&after, &keyword)?;
                input.parse::<Token![=]>()?;
                after = Some(Int::parse(input, "how many denials earn a block")?);
            } else if lookahead.peek(kw::within) {
                let keyword: kw::within = input.parse()?;
                ensure_unset(&within, &keyword)?;
                input.parse::<Token![=]>()?;
                within = Some(DurationLit::parse(
                    input,
                    "the period denials are counted in",
                )?);
            } else if lookahead.peek(kw::block) {
                let keyword: kw::block = input.parse()?;
                ensure_unset(&blocks, &keyword)?;
                input.parse::<Token![=]>()?;
                blocks = Some(parse_blocks(input)?);
            } else {
                return Ok(false);
            }
            Ok(true)
        })?;
        let span = paren.span.join();
        let missing = |what: &str| {
            Error::new(
                span,
                format!("missing `{what}`: `penalty(after = 3, within = 10m, block = [15m, 1h])`"),
            )
        };
        Ok(Self {
            after: after.ok_or_else(|| missing("after"))?,
            within: within.ok_or_else(|| missing("within"))?,
            blocks: blocks.ok_or_else(|| missing("block"))?,
            span,
        })
    }
}

/// `15m`, or `[15m, 1h, 24h]`.
fn parse_blocks(input: ParseStream<'_>) -> syn::Result<Vec<DurationLit>> {
    if !input.peek(syn::token::Bracket) {
        return Ok(vec![DurationLit::parse(input, "how long a block lasts")?]);
    }
    let content;
    bracketed!(content in input);
    let mut blocks = Vec::new();
    while !content.is_empty() {
        blocks.push(DurationLit::parse(&content, "how long a block lasts")?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(blocks)
}
