//! Parsing and validating the arguments of `#[rate_limit(...)]`.
//!
//! [`Args`] is what was written, each value checked on its own as it is
//! parsed (a zero limit, an unknown unit...); [`Args::into_spec`] checks the
//! arguments against each other (missing rules, a cost above a limit...) and
//! gives the [`Spec`] the expansion turns into a `HandlerSpec`. Every error
//! points at the token to fix.

use std::fmt::Write as _;

use proc_macro2::Span;
use syn::parse::{Lookahead1, Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Error, Ident, LitInt, LitStr, Path, Token, bracketed, parenthesized, token};

mod kw {
    // Arguments.
    syn::custom_keyword!(rules);
    syn::custom_keyword!(by);
    syn::custom_keyword!(prevent_duplicate);
    syn::custom_keyword!(key);
    syn::custom_keyword!(message);
    syn::custom_keyword!(cost);
    syn::custom_keyword!(algorithm);
    syn::custom_keyword!(on_store_error);

    syn::custom_keyword!(fallback);
    syn::custom_keyword!(fail_open);
    syn::custom_keyword!(fail_closed);
    syn::custom_keyword!(instances);
    // `by` values.
    syn::custom_keyword!(ip);
    syn::custom_keyword!(user);
    syn::custom_keyword!(global);
    syn::custom_keyword!(header);
    syn::custom_keyword!(custom);
    // Algorithms.
    syn::custom_keyword!(sliding_log);
    syn::custom_keyword!(fixed_window);
    syn::custom_keyword!(sliding_window);
    syn::custom_keyword!(token_bucket);
    syn::custom_keyword!(leaky_bucket);
    syn::custom_keyword!(gcra);
    // Bucket and GCRA arguments.
    syn::custom_keyword!(rate);
    syn::custom_keyword!(burst);
    syn::custom_keyword!(capacity);
}

/// The most rules one policy holds (limiter-core's `MAX_RULES`).
pub(crate) const MAX_RULES: usize = 6;
/// The longest window or period: 366 days (limiter-core's `MAX_WINDOW`).
pub(crate) const MAX_WINDOW_US: u64 = 366 * DAY_US;
/// The largest limit, amount or bucket both stores compute with exactly
/// (limiter-core's `EXACT_LIMIT`).
pub(crate) const EXACT_LIMIT: u64 = 1 << 50;
/// `prevent_duplicate` without a window: one request per 5 s.
pub(crate) const DEFAULT_DUPLICATE_WINDOW_US: u64 = 5 * SECOND_US;

const MILLISECOND_US: u64 = 1_000;
const SECOND_US: u64 = 1_000_000;
const MINUTE_US: u64 = 60 * SECOND_US;
const HOUR_US: u64 = 60 * MINUTE_US;
const DAY_US: u64 = 24 * HOUR_US;

const UNITS: &str = "ms, s, m, h or d";

/// Microseconds in one `unit`, for the units a window or period may use.
fn unit_us(unit: &str) -> Option<u64> {
    match unit {
        "ms" => Some(MILLISECOND_US),
        "s" => Some(SECOND_US),
        "m" => Some(MINUTE_US),
        "h" => Some(HOUR_US),
        "d" => Some(DAY_US),
        _ => None,
    }
}

/// The validated arguments: what the generated `HandlerSpec` holds.
pub(crate) struct Spec {
    pub(crate) algorithm: Algorithm,
    pub(crate) cost: u64,
    pub(crate) by: By,
    pub(crate) key_prefix: Option<LitStr>,
    pub(crate) message: Option<LitStr>,
    pub(crate) on_store_error: Option<OnStoreError>,
}

/// What to decide when the store fails, for this handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnStoreError {
    /// A local limiter with each limit divided by `instances`.
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
            content.parse::<kw::instances>()?;
            content.parse::<Token![=]>()?;
            let count = parse_count(&content, "the number of instances")?;
            let instances = u32::try_from(count.value).map_err(|_| {
                Error::new_spanned(&count.lit, "the number of instances must fit in a u32")
            })?;
            if !content.is_empty() {
                return Err(content.error("expected `)` after `instances = N`"));
            }
            Ok(Self::Fallback(instances))
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

/// An algorithm with valid parameters, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Algorithm {
    SlidingLog {
        rules: Vec<Rule>,
        prevent_duplicate_us: Option<u64>,
    },
    FixedWindow(Rule),
    SlidingWindow(Rule),
    TokenBucket(Bucket),
    LeakyBucket(Bucket),
    Gcra(Bucket),
}

/// At most `limit` requests in any `window_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) limit: u64,
    pub(crate) window_us: u64,
}

/// `amount` per `period_us`, holding `size` (the capacity, or GCRA's burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) amount: u64,
    pub(crate) period_us: u64,
    pub(crate) size: u64,
}

/// Whose requests share a limit.
pub(crate) enum By {
    Ip,
    User,
    Global,
    Header(LitStr),
    Custom(Path),
}

/// The arguments as written, each value valid on its own.
#[derive(Default)]
pub(crate) struct Args {
    rules: Option<RulesArg>,
    by: Option<By>,
    prevent_duplicate: Option<PreventDuplicate>,
    key: Option<LitStr>,
    message: Option<LitStr>,
    cost: Option<Count>,
    algorithm: Option<AlgorithmArg>,
    on_store_error: Option<OnStoreError>,
}

struct RulesArg {
    keyword: kw::rules,
    rules: Vec<RuleArg>,
}

struct RuleArg {
    rule: Rule,
    paren: token::Paren,
}

struct PreventDuplicate {
    keyword: kw::prevent_duplicate,
    window_us: u64,
}

/// A positive integer as written.
struct Count {
    value: u64,
    lit: LitInt,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BucketKind {
    TokenBucket,
    LeakyBucket,
    Gcra,
}

impl BucketKind {
    const fn name(self) -> &'static str {
        match self {
            Self::TokenBucket => "token_bucket",
            Self::LeakyBucket => "leaky_bucket",
            Self::Gcra => "gcra",
        }
    }

    /// The argument holding the bucket's size.
    const fn size_name(self) -> &'static str {
        match self {
            Self::TokenBucket | Self::Gcra => "burst",
            Self::LeakyBucket => "capacity",
        }
    }

    const fn example(self) -> &'static str {
        match self {
            Self::TokenBucket => "token_bucket(rate = 1/s, burst = 10)",
            Self::LeakyBucket => "leaky_bucket(rate = 2/s, capacity = 5)",
            Self::Gcra => "gcra(rate = 100/60s, burst = 20)",
        }
    }
}

enum AlgorithmArg {
    SlidingLog(Ident),
    FixedWindow(Ident),
    SlidingWindow(Ident),
    Bucket {
        kind: BucketKind,
        name: Ident,
        amount: u64,
        period_us: u64,
        size: Count,
    },
}

impl AlgorithmArg {
    fn name(&self) -> &Ident {
        match self {
            Self::SlidingLog(name) | Self::FixedWindow(name) | Self::SlidingWindow(name) => name,
            Self::Bucket { name, .. } => name,
        }
    }
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Self::default();
        while !input.is_empty() {
            let lookahead = input.lookahead1();
            if lookahead.peek(kw::rules) {
                let keyword: kw::rules = input.parse()?;
                once(&args.rules, keyword.span, "rules")?;
                input.parse::<Token![=]>()?;
                let rules = parse_rules(input)?;
                args.rules = Some(RulesArg { keyword, rules });
            } else if lookahead.peek(kw::by) {
                let keyword: kw::by = input.parse()?;
                once(&args.by, keyword.span, "by")?;
                input.parse::<Token![=]>()?;
                args.by = Some(input.parse()?);
            } else if lookahead.peek(kw::prevent_duplicate) {
                let keyword: kw::prevent_duplicate = input.parse()?;
                once(&args.prevent_duplicate, keyword.span, "prevent_duplicate")?;
                let window_us = if input.peek(Token![=]) {
                    input.parse::<Token![=]>()?;
                    parse_duration(input, "the prevent_duplicate window")?
                } else {
                    DEFAULT_DUPLICATE_WINDOW_US
                };
                args.prevent_duplicate = Some(PreventDuplicate { keyword, window_us });
            } else if lookahead.peek(kw::key) {
                let keyword: kw::key = input.parse()?;
                once(&args.key, keyword.span, "key")?;
                input.parse::<Token![=]>()?;
                args.key = Some(parse_key_prefix(input)?);
            } else if lookahead.peek(kw::message) {
                let keyword: kw::message = input.parse()?;
                once(&args.message, keyword.span, "message")?;
                input.parse::<Token![=]>()?;
                args.message = Some(input.parse()?);
            } else if lookahead.peek(kw::cost) {
                let keyword: kw::cost = input.parse()?;
                once(&args.cost, keyword.span, "cost")?;
                input.parse::<Token![=]>()?;
                args.cost = Some(parse_count(input, "the cost of a request")?);
            } else if lookahead.peek(kw::algorithm) {
                let keyword: kw::algorithm = input.parse()?;
                once(&args.algorithm, keyword.span, "algorithm")?;
                input.parse::<Token![=]>()?;
                args.algorithm = Some(input.parse()?);
            } else if lookahead.peek(kw::on_store_error) {
                let keyword: kw::on_store_error = input.parse()?;
                once(&args.on_store_error, keyword.span, "on_store_error")?;
                input.parse::<Token![=]>()?;
                args.on_store_error = Some(input.parse()?);
            } else {
                return Err(unknown(input, lookahead, "argument"));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}

/// Refuses an argument given twice, pointing at the second one.
fn once<T>(slot: &Option<T>, span: Span, name: &str) -> syn::Result<()> {
    match slot {
        Some(_) => Err(Error::new(span, format!("duplicate argument `{name}`"))),
        None => Ok(()),
    }
}

/// The lookahead's error, naming the unknown word when there is one.
fn unknown(input: ParseStream<'_>, lookahead: Lookahead1<'_>, what: &str) -> Error {
    let expected = lookahead.error();
    match input.cursor().ident() {
        Some((ident, _)) => Error::new(
            ident.span(),
            format!("unknown {what} `{ident}`, {expected}"),
        ),
        None => expected,
    }
}

/// `[(10, 60s), (20, 120s)]`.
fn parse_rules(input: ParseStream<'_>) -> syn::Result<Vec<RuleArg>> {
    if !input.peek(token::Bracket) {
        return Err(input.error("expected a list of rules, like `[(10, 60s), (20, 120s)]`"));
    }
    let content;
    let bracket = bracketed!(content in input);
    let rules = Punctuated::<RuleArg, Token![,]>::parse_terminated(&content)?;
    if rules.is_empty() {
        return Err(Error::new(
            bracket.span.join(),
            "`rules` needs at least one rule, like `[(10, 60s)]`",
        ));
    }
    Ok(rules.into_iter().collect())
}

impl Parse for RuleArg {
    /// `(10, 60s)`.
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if !input.peek(token::Paren) {
            return Err(input.error("expected a rule `(limit, window)`, like `(10, 60s)`"));
        }
        let content;
        let paren = parenthesized!(content in input);
        let limit = parse_count(&content, "the limit of a rule")?;
        if limit.value > EXACT_LIMIT {
            return Err(Error::new_spanned(
                &limit.lit,
                format!(
                    "the limit of a rule must be at most 2^50, got {}",
                    limit.value
                ),
            ));
        }
        content.parse::<Token![,]>()?;
        let window_us = parse_duration(&content, "the window of a rule")?;
        if content.peek(Token![,]) {
            content.parse::<Token![,]>()?;
        }
        if !content.is_empty() {
            return Err(content.error("a rule is `(limit, window)`, like `(10, 60s)`"));
        }
        Ok(Self {
            rule: Rule {
                limit: limit.value,
                window_us,
            },
            paren,
        })
    }
}

/// A positive integer without a suffix; `what` names it in errors.
fn parse_count(input: ParseStream<'_>, what: &str) -> syn::Result<Count> {
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
    let value = lit.base10_parse::<u64>()?;
    if value == 0 {
        return Err(Error::new_spanned(
            &lit,
            format!("{what} must be at least 1, got 0"),
        ));
    }
    Ok(Count { value, lit })
}

/// A duration written as one integer literal with a unit suffix: `60s`.
fn parse_duration(input: ParseStream<'_>, what: &str) -> syn::Result<u64> {
    if !input.peek(LitInt) {
        return Err(input.error(format!(
            "expected {what}, an integer with a unit ({UNITS}) like `60s`"
        )));
    }
    let lit: LitInt = input.parse()?;
    duration_us(&lit, what)
}

fn duration_us(lit: &LitInt, what: &str) -> syn::Result<u64> {
    let unit = lit.suffix();
    if unit.is_empty() {
        return Err(Error::new_spanned(
            lit,
            format!("{what} needs a unit ({UNITS}), like `{lit}s`"),
        ));
    }
    let Some(unit_us) = unit_us(unit) else {
        return Err(Error::new_spanned(
            lit,
            format!("unknown unit `{unit}` in `{lit}`: expected {UNITS}"),
        ));
    };
    let value = lit.base10_parse::<u64>()?;
    if value == 0 {
        return Err(Error::new_spanned(lit, format!("{what} must not be zero")));
    }
    match value.checked_mul(unit_us) {
        Some(us) if us <= MAX_WINDOW_US => Ok(us),
        _ => Err(Error::new_spanned(
            lit,
            format!("{what} must be at most 366 days, got {lit}"),
        )),
    }
}

/// `"prefix"`: a non-empty prefix that cannot change a key's shape in Redis Cluster.
fn parse_key_prefix(input: ParseStream<'_>) -> syn::Result<LitStr> {
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
            let name: LitStr = content.parse()?;
            check_header_name(&name)?;
            Ok(Self::Header(name))
        } else if lookahead.peek(kw::custom) {
            input.parse::<kw::custom>()?;
            let content;
            parenthesized!(content in input);
            let path: Path = content.parse()?;
            if !content.is_empty() {
                return Err(
                    content.error("expected the path of a function, like `custom(keys::api_key)`")
                );
            }
            Ok(Self::Custom(path))
        } else {
            Err(unknown(input, lookahead, "`by` value"))
        }
    }
}

/// A header name as `http::HeaderName` accepts it, in lowercase.
fn check_header_name(lit: &LitStr) -> syn::Result<()> {
    let name = lit.value();
    if name.is_empty() {
        return Err(Error::new_spanned(lit, "the header name must not be empty"));
    }
    let is_token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if let Some(c) = name.chars().find(|c| !c.is_ascii() || !is_token(*c as u8)) {
        return Err(Error::new_spanned(
            lit,
            format!("invalid header name {name:?}: {c:?} is not allowed in a header name"),
        ));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(Error::new_spanned(
            lit,
            format!(
                "header names are written in lowercase: use {:?}",
                name.to_ascii_lowercase()
            ),
        ));
    }
    Ok(())
}

impl Parse for AlgorithmArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        enum Choice {
            Window(fn(Ident) -> AlgorithmArg),
            Bucket(BucketKind),
        }
        let lookahead = input.lookahead1();
        let choice = if lookahead.peek(kw::sliding_log) {
            Choice::Window(Self::SlidingLog)
        } else if lookahead.peek(kw::fixed_window) {
            Choice::Window(Self::FixedWindow)
        } else if lookahead.peek(kw::sliding_window) {
            Choice::Window(Self::SlidingWindow)
        } else if lookahead.peek(kw::token_bucket) {
            Choice::Bucket(BucketKind::TokenBucket)
        } else if lookahead.peek(kw::leaky_bucket) {
            Choice::Bucket(BucketKind::LeakyBucket)
        } else if lookahead.peek(kw::gcra) {
            Choice::Bucket(BucketKind::Gcra)
        } else {
            return Err(unknown(input, lookahead, "algorithm"));
        };
        let name: Ident = input.parse()?;
        let kind = match choice {
            Choice::Window(algorithm) => return Ok(algorithm(name)),
            Choice::Bucket(kind) => kind,
        };
        let needs = || {
            Error::new(
                name.span(),
                format!(
                    "{} needs `rate` and `{}`, like `{}`",
                    kind.name(),
                    kind.size_name(),
                    kind.example()
                ),
            )
        };
        if !input.peek(token::Paren) {
            return Err(needs());
        }
        let content;
        parenthesized!(content in input);
        let mut rate = None;
        let mut size = None;
        while !content.is_empty() {
            let lookahead = content.lookahead1();
            if lookahead.peek(kw::rate) {
                let keyword: kw::rate = content.parse()?;
                once(&rate, keyword.span, "rate")?;
                content.parse::<Token![=]>()?;
                rate = Some(parse_rate(&content)?);
            } else if kind == BucketKind::LeakyBucket && lookahead.peek(kw::capacity) {
                let keyword: kw::capacity = content.parse()?;
                once(&size, keyword.span, "capacity")?;
                content.parse::<Token![=]>()?;
                size = Some(parse_count(&content, "the capacity")?);
            } else if kind != BucketKind::LeakyBucket && lookahead.peek(kw::burst) {
                let keyword: kw::burst = content.parse()?;
                once(&size, keyword.span, "burst")?;
                content.parse::<Token![=]>()?;
                size = Some(parse_count(&content, "the burst")?);
            } else {
                let what = format!("{} argument", kind.name());
                return Err(unknown(&content, lookahead, &what));
            }
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        match (rate, size) {
            (Some((amount, period_us)), Some(size)) => Ok(Self::Bucket {
                kind,
                name,
                amount,
                period_us,
                size,
            }),
            _ => Err(needs()),
        }
    }
}

/// `1/s`, `100/60s`: an amount per period.
fn parse_rate(input: ParseStream<'_>) -> syn::Result<(u64, u64)> {
    let amount = if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        if !lit.suffix().is_empty() {
            return Err(Error::new_spanned(
                &lit,
                "a rate is an amount per period, like `1/s` or `100/60s`",
            ));
        }
        let value = lit.base10_parse::<u64>()?;
        if value == 0 {
            return Err(Error::new_spanned(
                &lit,
                "a rate must allow at least 1 request per period, got 0",
            ));
        }
        if value > EXACT_LIMIT {
            return Err(Error::new_spanned(
                &lit,
                format!("the amount of a rate must be at most 2^50, got {value}"),
            ));
        }
        value
    } else {
        return Err(input.error("expected a rate, an amount per period like `1/s` or `100/60s`"));
    };
    if !input.peek(Token![/]) {
        return Err(input.error("expected `/` and a period, like `1/s` or `100/60s`"));
    }
    input.parse::<Token![/]>()?;
    let period_us = if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        duration_us(&lit, "the period of a rate")?
    } else if let Ok(unit) = input.fork().call(Ident::parse) {
        input.parse::<Ident>()?;
        unit_us(&unit.to_string()).ok_or_else(|| {
            Error::new(
                unit.span(),
                format!("unknown unit `{unit}`: expected {UNITS}"),
            )
        })?
    } else {
        return Err(input.error(format!(
            "expected a period after `/`: a unit ({UNITS}) or a duration like `60s`"
        )));
    };
    Ok((amount, period_us))
}

impl Args {
    /// Checks the arguments against each other.
    pub(crate) fn into_spec(self) -> syn::Result<Spec> {
        let algorithm = self.algorithm()?;
        let cost = match &self.cost {
            Some(cost) => {
                check_cost(&algorithm, cost)?;
                cost.value
            }
            None => 1,
        };
        Ok(Spec {
            algorithm,
            cost,
            by: self.by.unwrap_or(By::Ip),
            key_prefix: self.key,
            message: self.message,
            on_store_error: self.on_store_error,
        })
    }

    fn algorithm(&self) -> syn::Result<Algorithm> {
        let Some(algorithm) = &self.algorithm else {
            return self.sliding_log(Span::call_site());
        };
        let name = algorithm.name();
        if !matches!(algorithm, AlgorithmArg::SlidingLog(_))
            && let Some(prevent) = &self.prevent_duplicate
        {
            return Err(Error::new(
                prevent.keyword.span,
                format!("prevent_duplicate works with the sliding log only, not with {name}"),
            ));
        }
        match algorithm {
            AlgorithmArg::SlidingLog(name) => self.sliding_log(name.span()),
            AlgorithmArg::FixedWindow(name) => self.one_rule(name).map(Algorithm::FixedWindow),
            AlgorithmArg::SlidingWindow(name) => self.one_rule(name).map(Algorithm::SlidingWindow),
            AlgorithmArg::Bucket {
                kind,
                name,
                amount,
                period_us,
                size,
            } => {
                if let Some(rules) = &self.rules {
                    return Err(Error::new(
                        rules.keyword.span,
                        format!(
                            "{name} does not take `rules`: its limit is its `rate` and `{}`, like `{}`",
                            kind.size_name(),
                            kind.example()
                        ),
                    ));
                }
                let bucket = Bucket {
                    amount: *amount,
                    period_us: *period_us,
                    size: size.value,
                };
                check_exact(*kind, bucket, &size.lit)?;
                Ok(match kind {
                    BucketKind::TokenBucket => Algorithm::TokenBucket(bucket),
                    BucketKind::LeakyBucket => Algorithm::LeakyBucket(bucket),
                    BucketKind::Gcra => Algorithm::Gcra(bucket),
                })
            }
        }
    }

    /// The sliding log; `span` is where a missing `rules` is reported.
    fn sliding_log(&self, span: Span) -> syn::Result<Algorithm> {
        let Some(rules) = &self.rules else {
            return Err(Error::new(
                span,
                "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`",
            ));
        };
        if let Some(extra) = rules.rules.get(MAX_RULES) {
            return Err(Error::new(
                extra.paren.span.join(),
                format!(
                    "a policy holds at most {MAX_RULES} rules, got {}",
                    rules.rules.len()
                ),
            ));
        }
        if let Some(prevent) = &self.prevent_duplicate
            && rules.rules.len() == MAX_RULES
        {
            let rule = rule_name(Rule {
                limit: 1,
                window_us: prevent.window_us,
            });
            return Err(Error::new(
                prevent.keyword.span,
                format!(
                    "a policy holds at most {MAX_RULES} rules, got {}: prevent_duplicate adds the rule {rule}",
                    MAX_RULES + 1,
                ),
            ));
        }
        Ok(Algorithm::SlidingLog {
            rules: rules.rules.iter().map(|r| r.rule).collect(),
            prevent_duplicate_us: self.prevent_duplicate.as_ref().map(|p| p.window_us),
        })
    }

    /// The single rule of a fixed or sliding window.
    fn one_rule(&self, name: &Ident) -> syn::Result<Rule> {
        let Some(rules) = &self.rules else {
            return Err(Error::new(
                name.span(),
                format!(
                    "missing `rules`: {name} needs exactly one rule, like `rules = [(100, 60s)]`"
                ),
            ));
        };
        if let Some(extra) = rules.rules.get(1) {
            return Err(Error::new(
                extra.paren.span.join(),
                format!("{name} takes exactly one rule, got {}", rules.rules.len()),
            ));
        }
        Ok(rules.rules[0].rule)
    }
}

/// A cost must fit in every rule, the capacity or the burst.
fn check_cost(algorithm: &Algorithm, cost: &Count) -> syn::Result<()> {
    let (capacity, what) = match algorithm {
        Algorithm::SlidingLog {
            rules,
            prevent_duplicate_us,
        } => {
            let duplicate = prevent_duplicate_us.map(|window_us| Rule {
                limit: 1,
                window_us,
            });
            smallest(rules.iter().copied().chain(duplicate))
        }
        Algorithm::FixedWindow(rule) | Algorithm::SlidingWindow(rule) => smallest([*rule]),
        Algorithm::TokenBucket(bucket) | Algorithm::LeakyBucket(bucket) => {
            (bucket.size, "capacity".to_owned())
        }
        Algorithm::Gcra(bucket) => (bucket.size, "burst".to_owned()),
    };
    if cost.value > capacity {
        return Err(Error::new_spanned(
            &cost.lit,
            format!(
                "a cost of {} can never pass: it exceeds the {what} of {capacity}",
                cost.value
            ),
        ));
    }
    Ok(())
}

/// The rule with the smallest limit (the first of equals), named as limiter-core does.
fn smallest(rules: impl IntoIterator<Item = Rule>) -> (u64, String) {
    let rule = rules
        .into_iter()
        .reduce(|a, b| if b.limit < a.limit { b } else { a })
        .expect("a policy has at least one rule");
    (rule.limit, format!("limit of rule {}", rule_name(rule)))
}

/// The exactness limits limiter-core applies to buckets and GCRA, so that
/// every accepted attribute builds a policy at run time.
fn check_exact(kind: BucketKind, bucket: Bucket, size: &LitInt) -> syn::Result<()> {
    let rate = rate_name(bucket.amount, bucket.period_us);
    match kind {
        BucketKind::TokenBucket | BucketKind::LeakyBucket => {
            let unit = bucket.period_us / gcd(bucket.amount, bucket.period_us);
            match bucket.size.checked_mul(unit) {
                Some(full) if full <= EXACT_LIMIT => Ok(()),
                _ => Err(Error::new_spanned(
                    size,
                    format!(
                        "the bucket is too large to compute exactly: capacity {} at {rate} needs more than 2^50 sub-units",
                        bucket.size
                    ),
                )),
            }
        }
        BucketKind::Gcra => {
            let interval_us = bucket.period_us.div_ceil(bucket.amount);
            match interval_us.checked_mul(bucket.size) {
                Some(tolerance) if tolerance <= EXACT_LIMIT => Ok(()),
                _ => Err(Error::new_spanned(
                    size,
                    format!(
                        "the burst is too large to compute exactly: burst {} at {rate} spans more than 2^50 µs",
                        bucket.size
                    ),
                )),
            }
        }
    }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `10-per-60s`: a rule's name in limiter-core, headers and logs.
pub(crate) fn rule_name(rule: Rule) -> String {
    let mut name = format!("{}-per-", rule.limit);
    push_duration(&mut name, rule.window_us);
    name
}

fn rate_name(amount: u64, period_us: u64) -> String {
    let mut name = format!("{amount}/");
    push_duration(&mut name, period_us);
    name
}

/// A duration in the largest unit that divides it, as limiter-core writes it.
fn push_duration(out: &mut String, us: u64) {
    const UNITS: [(u64, &str); 5] = [
        (DAY_US, "d"),
        (HOUR_US, "h"),
        (SECOND_US, "s"),
        (MILLISECOND_US, "ms"),
        (1, "us"),
    ];
    for (size, unit) in UNITS {
        if us.is_multiple_of(size) {
            let _ = write!(out, "{}{unit}", us / size);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(attr: &str) -> syn::Result<Spec> {
        syn::parse_str::<Args>(attr)?.into_spec()
    }

    fn algorithm(attr: &str) -> Algorithm {
        match spec(attr) {
            Ok(spec) => spec.algorithm,
            Err(err) => panic!("`{attr}` was refused: {err}"),
        }
    }

    fn error(attr: &str) -> String {
        match spec(attr) {
            Ok(_) => panic!("`{attr}` was accepted"),
            Err(err) => err.to_string(),
        }
    }

    fn rule(limit: u64, window_us: u64) -> Rule {
        Rule { limit, window_us }
    }

    #[test]
    fn rules_default_to_the_sliding_log() {
        assert_eq!(
            algorithm("rules = [(10, 60s), (20, 120s)]"),
            Algorithm::SlidingLog {
                rules: vec![rule(10, 60 * SECOND_US), rule(20, 120 * SECOND_US)],
                prevent_duplicate_us: None,
            }
        );
        assert_eq!(
            algorithm("rules = [(1, 250ms,), (2, 3m), (4, 5h), (6, 366d),],"),
            Algorithm::SlidingLog {
                rules: vec![
                    rule(1, 250 * MILLISECOND_US),
                    rule(2, 3 * MINUTE_US),
                    rule(4, 5 * HOUR_US),
                    rule(6, MAX_WINDOW_US),
                ],
                prevent_duplicate_us: None,
            }
        );
    }

    #[test]
    fn every_argument_parses() {
        let spec = spec(
            r#"rules = [(10, 60s), (20, 120s)], by = header("x-api-key"), prevent_duplicate = 3s,
               key = "posts", message = "slow down", cost = 1, algorithm = sliding_log"#,
        )
        .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            spec.algorithm,
            Algorithm::SlidingLog {
                rules: vec![rule(10, 60 * SECOND_US), rule(20, 120 * SECOND_US)],
                prevent_duplicate_us: Some(3 * SECOND_US),
            }
        );
        assert!(matches!(&spec.by, By::Header(name) if name.value() == "x-api-key"));
        assert_eq!(spec.key_prefix.map(|k| k.value()).as_deref(), Some("posts"));
        assert_eq!(
            spec.message.map(|m| m.value()).as_deref(),
            Some("slow down")
        );
        assert_eq!(spec.cost, 1);
    }

    #[test]
    fn defaults() {
        let spec =
            spec("rules = [(5, 60s)], prevent_duplicate").unwrap_or_else(|err| panic!("{err}"));
        assert!(matches!(spec.by, By::Ip));
        assert_eq!(spec.cost, 1);
        assert!(spec.key_prefix.is_none() && spec.message.is_none());
        assert_eq!(
            spec.algorithm,
            Algorithm::SlidingLog {
                rules: vec![rule(5, 60 * SECOND_US)],
                prevent_duplicate_us: Some(DEFAULT_DUPLICATE_WINDOW_US),
            }
        );
    }

    #[test]
    fn by_values() {
        let by = |attr: &str| spec(attr).unwrap_or_else(|err| panic!("{err}")).by;
        assert!(matches!(by("rules = [(1, 1s)], by = ip"), By::Ip));
        assert!(matches!(by("rules = [(1, 1s)], by = user"), By::User));
        assert!(matches!(by("rules = [(1, 1s)], by = global"), By::Global));
        let By::Custom(path) = by("rules = [(1, 1s)], by = custom(crate::keys::tenant)") else {
            panic!("not custom");
        };
        assert_eq!(quote::quote!(#path).to_string(), "crate :: keys :: tenant");
    }

    #[test]
    fn window_algorithms_take_one_rule() {
        assert_eq!(
            algorithm("algorithm = fixed_window, rules = [(100, 1m)]"),
            Algorithm::FixedWindow(rule(100, MINUTE_US))
        );
        assert_eq!(
            algorithm("rules = [(1000, 1h)], algorithm = sliding_window, cost = 10"),
            Algorithm::SlidingWindow(rule(1000, HOUR_US))
        );
    }

    #[test]
    fn buckets_and_gcra() {
        assert_eq!(
            algorithm("algorithm = token_bucket(rate = 1/s, burst = 10), by = user"),
            Algorithm::TokenBucket(Bucket {
                amount: 1,
                period_us: SECOND_US,
                size: 10
            })
        );
        assert_eq!(
            algorithm("algorithm = leaky_bucket(capacity = 5, rate = 2/s,), cost = 5"),
            Algorithm::LeakyBucket(Bucket {
                amount: 2,
                period_us: SECOND_US,
                size: 5
            })
        );
        assert_eq!(
            algorithm("algorithm = gcra(rate = 100/60s, burst = 20)"),
            Algorithm::Gcra(Bucket {
                amount: 100,
                period_us: 60 * SECOND_US,
                size: 20
            })
        );
        assert_eq!(
            algorithm("algorithm = gcra(rate = 5/ms, burst = 1)"),
            Algorithm::Gcra(Bucket {
                amount: 5,
                period_us: MILLISECOND_US,
                size: 1
            })
        );
    }

    #[test]
    fn errors_in_rules() {
        assert_eq!(
            error("rules = [(0, 60s)]"),
            "the limit of a rule must be at least 1, got 0"
        );
        assert_eq!(
            error("rules = [(10, 0s)]"),
            "the window of a rule must not be zero"
        );
        assert_eq!(
            error("rules = [(10, 60x)]"),
            "unknown unit `x` in `60x`: expected ms, s, m, h or d"
        );
        assert_eq!(
            error("rules = [(10, 60)]"),
            "the window of a rule needs a unit (ms, s, m, h or d), like `60s`"
        );
        assert_eq!(
            error("rules = [(10, 367d)]"),
            "the window of a rule must be at most 366 days, got 367d"
        );
        assert_eq!(
            error("rules = [(10, 99999999999999999h)]"),
            "the window of a rule must be at most 366 days, got 99999999999999999h"
        );
        assert_eq!(
            error("rules = [(10, 1.5s)]"),
            "expected the window of a rule, an integer with a unit (ms, s, m, h or d) like `60s`"
        );
        assert_eq!(
            error("rules = [(10s, 60s)]"),
            "the limit of a rule is a plain integer like `10`, without a unit or suffix"
        );
        assert_eq!(
            error("rules = [(2251799813685248, 1s)]"),
            "the limit of a rule must be at most 2^50, got 2251799813685248"
        );
        assert_eq!(
            error("rules = [(1, 1s, 2)]"),
            "a rule is `(limit, window)`, like `(10, 60s)`"
        );
        assert_eq!(
            error("rules = [10, 60s]"),
            "expected a rule `(limit, window)`, like `(10, 60s)`"
        );
        assert_eq!(
            error("rules = (10, 60s)"),
            "expected a list of rules, like `[(10, 60s), (20, 120s)]`"
        );
        assert_eq!(
            error("rules = []"),
            "`rules` needs at least one rule, like `[(10, 60s)]`"
        );
        assert_eq!(
            error("rules = [(1,1s),(2,1s),(3,1s),(4,1s),(5,1s),(6,1s),(7,1s)]"),
            "a policy holds at most 6 rules, got 7"
        );
        assert_eq!(
            error("rules = [(1,1s),(2,1s),(3,1s),(4,1s),(5,1s),(6,1s)], prevent_duplicate"),
            "a policy holds at most 6 rules, got 7: prevent_duplicate adds the rule 1-per-5s"
        );
    }

    #[test]
    fn errors_in_arguments() {
        assert_eq!(
            error("rule = [(1, 1s)]"),
            "unknown argument `rule`, expected one of: `rules`, `by`, `prevent_duplicate`, `key`, `message`, `cost`, `algorithm`, `on_store_error`"
        );
        assert_eq!(
            error("rules = [(1, 1s)], rules = [(2, 1s)]"),
            "duplicate argument `rules`"
        );
        assert_eq!(
            error("by = ip, rules = [(1, 1s)], by = user"),
            "duplicate argument `by`"
        );
        assert_eq!(error("rules = [(1, 1s)] by = ip"), "expected `,`");
        assert_eq!(
            error("by = ip"),
            "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`"
        );
        assert_eq!(
            error(""),
            "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`"
        );
        assert_eq!(
            error("rules = [(1, 1s)], cost = 0"),
            "the cost of a request must be at least 1, got 0"
        );
        assert_eq!(
            error("rules = [(10, 60s), (3, 1s)], cost = 4"),
            "a cost of 4 can never pass: it exceeds the limit of rule 3-per-1s of 3"
        );
        assert_eq!(
            error("rules = [(10, 60s)], prevent_duplicate = 1500ms, cost = 2"),
            "a cost of 2 can never pass: it exceeds the limit of rule 1-per-1500ms of 1"
        );
        assert_eq!(
            error("rules = [(10, 60s)], prevent_duplicate = 0s"),
            "the prevent_duplicate window must not be zero"
        );
        assert_eq!(
            error(r#"rules = [(1, 1s)], key = """#),
            "the key prefix must not be empty"
        );
        assert_eq!(
            error(r#"rules = [(1, 1s)], key = "a{b}""#),
            "the key prefix must not contain '{': braces and whitespace would change the key's shape"
        );
    }

    #[test]
    fn errors_in_by() {
        assert_eq!(
            error("rules = [(1, 1s)], by = tenant"),
            "unknown `by` value `tenant`, expected one of: `ip`, `user`, `global`, `header`, `custom`"
        );
        assert_eq!(
            error(r#"rules = [(1, 1s)], by = header("X-Api-Key")"#),
            r#"header names are written in lowercase: use "x-api-key""#
        );
        assert_eq!(
            error(r#"rules = [(1, 1s)], by = header("x api key")"#),
            r#"invalid header name "x api key": ' ' is not allowed in a header name"#
        );
        assert_eq!(
            error(r#"rules = [(1, 1s)], by = header("")"#),
            "the header name must not be empty"
        );
        assert_eq!(
            error("rules = [(1, 1s)], by = custom(1)"),
            "expected identifier"
        );
    }

    #[test]
    fn errors_in_algorithms() {
        assert_eq!(
            error("rules = [(1, 1s)], algorithm = leaky"),
            "unknown algorithm `leaky`, expected one of: `sliding_log`, `fixed_window`, `sliding_window`, `token_bucket`, `leaky_bucket`, `gcra`"
        );
        assert_eq!(
            error("algorithm = fixed_window"),
            "missing `rules`: fixed_window needs exactly one rule, like `rules = [(100, 60s)]`"
        );
        assert_eq!(
            error("algorithm = sliding_window, rules = [(1, 1s), (2, 2s)]"),
            "sliding_window takes exactly one rule, got 2"
        );
        assert_eq!(
            error("algorithm = sliding_log"),
            "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`"
        );
        assert_eq!(
            error("rules = [(1, 1s)], algorithm = token_bucket(rate = 1/s, burst = 10)"),
            "token_bucket does not take `rules`: its limit is its `rate` and `burst`, like `token_bucket(rate = 1/s, burst = 10)`"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/s, burst = 10), prevent_duplicate"),
            "prevent_duplicate works with the sliding log only, not with gcra"
        );
        assert_eq!(
            error("algorithm = fixed_window, rules = [(1, 1s)], prevent_duplicate = 2s"),
            "prevent_duplicate works with the sliding log only, not with fixed_window"
        );
        assert_eq!(
            error("algorithm = token_bucket"),
            "token_bucket needs `rate` and `burst`, like `token_bucket(rate = 1/s, burst = 10)`"
        );
        assert_eq!(
            error("algorithm = leaky_bucket(rate = 1/s)"),
            "leaky_bucket needs `rate` and `capacity`, like `leaky_bucket(rate = 2/s, capacity = 5)`"
        );
        assert_eq!(
            error("algorithm = token_bucket(rate = 1/s, capacity = 5)"),
            "unknown token_bucket argument `capacity`, expected `rate` or `burst`"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/s, burst = 2, burst = 3)"),
            "duplicate argument `burst`"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 0/s, burst = 20)"),
            "a rate must allow at least 1 request per period, got 0"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/0s, burst = 20)"),
            "the period of a rate must not be zero"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/sec, burst = 20)"),
            "unknown unit `sec`: expected ms, s, m, h or d"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/400d, burst = 20)"),
            "the period of a rate must be at most 366 days, got 400d"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1, burst = 20)"),
            "expected `/` and a period, like `1/s` or `100/60s`"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/s, burst = 0)"),
            "the burst must be at least 1, got 0"
        );
        assert_eq!(
            error("algorithm = leaky_bucket(rate = 1/s, capacity = 0)"),
            "the capacity must be at least 1, got 0"
        );
        assert_eq!(
            error("algorithm = token_bucket(rate = 1/s, burst = 10), cost = 11"),
            "a cost of 11 can never pass: it exceeds the capacity of 10"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 100/m, burst = 20), cost = 21"),
            "a cost of 21 can never pass: it exceeds the burst of 20"
        );
        assert_eq!(
            error("algorithm = token_bucket(rate = 1/1d, burst = 1048576)"),
            "the bucket is too large to compute exactly: capacity 1048576 at 1/1d needs more than 2^50 sub-units"
        );
        assert_eq!(
            error("algorithm = gcra(rate = 1/1d, burst = 1048576)"),
            "the burst is too large to compute exactly: burst 1048576 at 1/1d spans more than 2^50 µs"
        );
    }

    #[test]
    fn rules_are_named_like_limiter_core() {
        assert_eq!(rule_name(rule(10, 60 * SECOND_US)), "10-per-60s");
        assert_eq!(rule_name(rule(1, 1500 * MILLISECOND_US)), "1-per-1500ms");
        assert_eq!(rule_name(rule(5, 2 * HOUR_US)), "5-per-2h");
        assert_eq!(rule_name(rule(3, DAY_US)), "3-per-1d");
        assert_eq!(rule_name(rule(3, 7)), "3-per-7us");
    }

    #[test]
    fn failure_policies_parse() {
        let policy = |text: &str| {
            let args: Args =
                syn::parse_str(&format!("rules = [(1, 1s)], on_store_error = {text}")).unwrap();
            args.into_spec().unwrap().on_store_error
        };
        assert_eq!(policy("fallback"), Some(OnStoreError::Fallback(1)));
        assert_eq!(
            policy("fallback(instances = 4)"),
            Some(OnStoreError::Fallback(4))
        );
        assert_eq!(policy("fail_open"), Some(OnStoreError::FailOpen));
        assert_eq!(policy("fail_closed"), Some(OnStoreError::FailClosed));
        let error = syn::parse_str::<Args>("rules = [(1, 1s)], on_store_error = retry")
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "unknown failure policy `retry`, expected one of: `fallback`, `fail_open`, `fail_closed`"
        );
        let error =
            syn::parse_str::<Args>("rules = [(1, 1s)], on_store_error = fallback(instances = 0)")
                .err()
                .unwrap();
        assert_eq!(
            error.to_string(),
            "the number of instances must be at least 1, got 0"
        );
    }
}
