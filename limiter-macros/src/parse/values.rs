//! The values arguments take, each kept with the tokens it was written as,
//! so that an error about a value points at it.
//!
//! Nothing here judges a number: a zero limit or a window of 400 days parse
//! fine and are refused by limiter-model when the policy is checked
//! (`check::policy`). Only what the attribute's own syntax means is
//! checked: units, suffixes, the shape of a rule or a rate.

use std::time::Duration;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{Error, Ident, LitInt, LitStr, Token, bracketed, parenthesized, token};

use limiter_model::{DURATION_UNITS as UNITS, duration_unit, parse_duration};

/// A plain integer: a limit, a cost, a capacity.
pub(crate) struct Int {
    pub(crate) value: u64,
    pub(crate) lit: LitInt,
}

impl Int {
    /// `what` names the value in errors ("the limit of a rule").
    pub(crate) fn parse(input: ParseStream<'_>, what: &str) -> syn::Result<Self> {
        if !input.peek(LitInt) {
            return Err(input.error(format!("expected {what}, an integer like `10`")));
        }
        let lit: LitInt = input.parse()?;
        if !lit.suffix().is_empty() {
            return Err(Error::new_spanned(
                &lit,
                format!("{what} is a plain integer like `10`, without a unit or suffix"),
            ));
        }
        let value = lit.base10_parse()?;
        Ok(Self { value, lit })
    }
}

/// A duration as written: `60s`, `500ms`, `1d`, or a bare unit after the
/// `/` of a rate (`1/s`).
pub(crate) struct DurationLit {
    pub(crate) value: Duration,
    /// The literal or the unit, for errors.
    pub(crate) written: TokenStream,
}

impl DurationLit {
    /// An integer with a unit suffix; `what` names it in errors.
    pub(crate) fn parse(input: ParseStream<'_>, what: &str) -> syn::Result<Self> {
        if !input.peek(LitInt) {
            return Err(input.error(format!(
                "expected {what}, an integer with a unit ({UNITS}) like `60s`"
            )));
        }
        Self::from_lit(&input.parse()?, what)
    }

    fn from_lit(lit: &LitInt, what: &str) -> syn::Result<Self> {
        // Read as text by the function a live override's rules are read
        // with, so both refuse a duration with the same message.
        let written = format!("{}{}", lit.base10_digits(), lit.suffix());
        let value =
            parse_duration(&written, what).map_err(|error| Error::new_spanned(lit, error))?;
        Ok(Self {
            value,
            written: lit.to_token_stream(),
        })
    }

    /// One unit: the period of `1/s`.
    fn from_unit(unit: &Ident) -> syn::Result<Self> {
        let value = duration_unit(&unit.to_string()).ok_or_else(|| {
            Error::new(
                unit.span(),
                format!("unknown unit `{unit}`: expected {UNITS}"),
            )
        })?;
        Ok(Self {
            value,
            written: unit.to_token_stream(),
        })
    }
}

/// `(10, 60s)`: at most `limit` requests in any `window`.
pub(crate) struct RuleLit {
    pub(crate) paren: token::Paren,
    pub(crate) limit: Int,
    pub(crate) window: DurationLit,
}

impl RuleLit {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if !input.peek(token::Paren) {
            return Err(input.error("expected a rule `(limit, window)`, like `(10, 60s)`"));
        }
        let content;
        let paren = parenthesized!(content in input);
        let limit = Int::parse(&content, "the limit of a rule")?;
        content.parse::<Token![,]>()?;
        let window = DurationLit::parse(&content, "the window of a rule")?;
        if content.peek(Token![,]) {
            content.parse::<Token![,]>()?;
        }
        if !content.is_empty() {
            return Err(content.error("a rule is `(limit, window)`, like `(10, 60s)`"));
        }
        Ok(Self {
            paren,
            limit,
            window,
        })
    }
}

/// `[(10, 60s), (20, 120s)]`.
pub(crate) struct RulesLit {
    pub(crate) bracket: token::Bracket,
    pub(crate) rules: Vec<RuleLit>,
}

impl RulesLit {
    pub(crate) fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if !input.peek(token::Bracket) {
            return Err(input.error("expected a list of rules, like `[(10, 60s), (20, 120s)]`"));
        }
        let content;
        let bracket = bracketed!(content in input);
        let rules =
            Punctuated::<RuleLit, Token![,]>::parse_terminated_with(&content, RuleLit::parse)?;
        Ok(Self {
            bracket,
            rules: rules.into_iter().collect(),
        })
    }
}

/// `1/s`, `100/60s`: `amount` requests per `period`.
pub(crate) struct RateLit {
    pub(crate) amount: Int,
    pub(crate) period: DurationLit,
}

impl RateLit {
    pub(crate) fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if !input.peek(LitInt) {
            return Err(
                input.error("expected a rate, an amount per period like `1/s` or `100/60s`")
            );
        }
        let lit: LitInt = input.parse()?;
        if !lit.suffix().is_empty() {
            return Err(Error::new_spanned(
                &lit,
                "a rate is an amount per period, like `1/s` or `100/60s`",
            ));
        }
        let amount = Int {
            value: lit.base10_parse()?,
            lit,
        };
        if !input.peek(Token![/]) {
            return Err(input.error("expected `/` and a period, like `1/s` or `100/60s`"));
        }
        input.parse::<Token![/]>()?;
        let period = if input.peek(LitInt) {
            DurationLit::from_lit(&input.parse()?, "the period of a rate")?
        } else if input.peek(Ident) {
            DurationLit::from_unit(&input.parse()?)?
        } else {
            return Err(input.error(format!(
                "expected a period after `/`: a unit ({UNITS}) or a duration like `60s`"
            )));
        };
        Ok(Self { amount, period })
    }
}

/// `key = "prefix"`: a prefix that keeps the key's shape in Redis Cluster.
pub(crate) fn parse_key_prefix(input: ParseStream<'_>) -> syn::Result<LitStr> {
    let lit: LitStr = input.parse()?;
    let prefix = lit.value();
    if prefix.is_empty() {
        return Err(Error::new_spanned(&lit, "the key prefix must not be empty"));
    }
    if let Some(c) = prefix
        .chars()
        .find(|&c| c == '{' || c == '}' || c.is_whitespace() || c.is_control())
    {
        return Err(Error::new_spanned(
            &lit,
            format!(
                "the key prefix must not contain {c:?}: braces and whitespace would change the key's shape"
            ),
        ));
    }
    Ok(lit)
}

/// `"x-api-key"`: a header name `http::HeaderName::from_static` takes, so
/// the generated code cannot panic on it.
pub(crate) fn parse_header_name(input: ParseStream<'_>) -> syn::Result<LitStr> {
    use http::HeaderName;

    let lit: LitStr = input.parse()?;
    let name = lit.value();
    if HeaderName::from_lowercase(name.as_bytes()).is_ok() {
        return Ok(lit);
    }
    let message = if name.is_empty() {
        "the header name must not be empty".to_owned()
    } else if let Ok(lowercase) = HeaderName::from_bytes(name.as_bytes()) {
        format!(
            "header names are written in lowercase: use {:?}",
            lowercase.as_str()
        )
    } else {
        let refused = |c: &char| HeaderName::from_bytes(c.to_string().as_bytes()).is_err();
        match name.chars().find(refused) {
            Some(c) => {
                format!("invalid header name {name:?}: {c:?} is not allowed in a header name")
            }
            None => format!("invalid header name {name:?}"),
        }
    };
    Err(Error::new_spanned(&lit, message))
}
