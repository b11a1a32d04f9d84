//! Expand: the checked limit and the parsed function written out as the
//! handler type, its `LimitLayer` and the function it wraps.

mod business;
mod handler;
mod limit;
mod policy;
mod tokens;

use proc_macro2::TokenStream;
use quote::quote;

use crate::check::Limit;
use crate::parse::Handler;

/// The tests of the checks read the code they lead to.
#[cfg(test)]
pub(crate) use {business::calls, handler::param_names, policy::policy};

/// `handler` behind `limit`.
pub(crate) fn limited(limit: &Limit<'_>, handler: &Handler) -> TokenStream {
    handler::handler(handler, limit::limit(limit, handler))
}

/// `handler` without a limit, beside the error that refused its arguments:
/// routing it and calling `unlimited` still compile, so that the error is
/// the only one.
pub(crate) fn refused(handler: &Handler) -> TokenStream {
    let no_limit = quote!(::core::unreachable!(
        "`#[rate_limit]` refused its arguments"
    ));
    handler::handler(handler, no_limit)
}
