//! The shape every argument list of the attribute shares: `name = value`
//! pairs separated by commas, each name at most once, any other name an
//! error that lists the known ones.

use quote::ToTokens;
use syn::parse::{Lookahead1, Parse, ParseStream};
use syn::{Error, Token};

/// An argument as written: its keyword (where errors about it point) and
/// its value.
pub(crate) struct Arg<K, T> {
    pub(crate) keyword: K,
    pub(crate) value: T,
}

/// Parses `name = value, ...` until `input` ends.
///
/// `argument` parses one argument when the lookahead sees a name it knows
/// and answers `false` otherwise; the error then names the unknown word and
/// every name the lookahead was asked about. `what` names the list in that
/// error ("argument", "token_bucket argument").
pub(crate) fn parse_arguments(
    input: ParseStream<'_>,
    what: &str,
    mut argument: impl FnMut(ParseStream<'_>, &Lookahead1<'_>) -> syn::Result<bool>,
) -> syn::Result<()> {
    while !input.is_empty() {
        let lookahead = input.lookahead1();
        if !argument(input, &lookahead)? {
            return Err(unknown(input, lookahead, what));
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(())
}

/// `keyword = value` into `slot`, refused when `slot` is already set.
pub(crate) fn parse_assignment<K, T>(
    input: ParseStream<'_>,
    slot: &mut Option<Arg<K, T>>,
    value: impl FnOnce(ParseStream<'_>) -> syn::Result<T>,
) -> syn::Result<()>
where
    K: Parse + ToTokens,
{
    let keyword: K = input.parse()?;
    ensure_unset(slot, &keyword)?;
    input.parse::<Token![=]>()?;
    *slot = Some(Arg {
        keyword,
        value: value(input)?,
    });
    Ok(())
}

/// `keyword` alone, or `keyword = value`, into `slot`.
pub(crate) fn parse_optional_assignment<K, T>(
    input: ParseStream<'_>,
    slot: &mut Option<Arg<K, Option<T>>>,
    value: impl FnOnce(ParseStream<'_>) -> syn::Result<T>,
) -> syn::Result<()>
where
    K: Parse + ToTokens,
{
    let keyword: K = input.parse()?;
    ensure_unset(slot, &keyword)?;
    let value = if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        Some(value(input)?)
    } else {
        None
    };
    *slot = Some(Arg { keyword, value });
    Ok(())
}

/// Refuses an argument given twice, pointing at the second one.
pub(crate) fn ensure_unset<T>(slot: &Option<T>, keyword: &impl ToTokens) -> syn::Result<()> {
    match slot {
        Some(_) => Err(Error::new_spanned(
            keyword,
            format!("duplicate argument `{}`", keyword.to_token_stream()),
        )),
        None => Ok(()),
    }
}

/// The lookahead's error ("expected one of: ..."), naming the unknown word
/// when there is one.
pub(crate) fn unknown(input: ParseStream<'_>, lookahead: Lookahead1<'_>, what: &str) -> Error {
    let expected = lookahead.error();
    match input.cursor().ident() {
        Some((ident, _)) => Error::new(
            ident.span(),
            format!("unknown {what} `{ident}`, {expected}"),
        ),
        None => expected,
    }
}

/// Joins errors into one that reports each, in order.
pub(crate) fn combine(errors: impl IntoIterator<Item = Error>) -> Option<Error> {
    errors.into_iter().reduce(|mut all, error| {
        all.combine(error);
        all
    })
}
