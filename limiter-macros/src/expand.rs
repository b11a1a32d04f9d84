//! `#[rate_limit(...)]` on a function: the arguments and the function are
//! read, the policy is built through limiter-core, and the handler is
//! generated.

use proc_macro2::TokenStream;
use quote::quote;

use crate::args::Args;
use crate::business::{self, BusinessArgs};
use crate::generate;
use crate::handler::Handler;
use crate::policy::policy;

/// Expands `#[rate_limit(attr)] item`, reporting every mistake in the
/// arguments and in the function at once.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let limit = syn::parse2::<Args>(attr).and_then(|args| {
        let business = business::build(&args);
        let policy = if BusinessArgs::concurrency_only(&args) {
            Ok(None)
        } else {
            policy(&args).and_then(|policy| {
                business::check_counting(&args, &policy.value)?;
                Ok(Some(policy.tokens))
            })
        };
        match (business, policy) {
            (Ok(business), Ok(policy)) => Ok((args, policy, business)),
            (Err(mut error), Err(policy)) => {
                error.combine(policy);
                Err(error)
            }
            (Err(error), _) | (_, Err(error)) => Err(error),
        }
    });
    match (limit, Handler::parse(item)) {
        (Ok((args, policy, business)), Ok(handler)) => {
            let limit = generate::limit(&args, policy, business, &handler);
            Ok(generate::handler(&handler, limit))
        }
        (Err(mut limit), Err(handler)) => {
            limit.combine(handler);
            Err(limit)
        }
        (Err(error), Ok(_)) | (Ok(_), Err(error)) => Err(error),
    }
}

/// `error`, and beside it what keeps it the only error: the handler without
/// a limit when the function can be one (so that routing it and calling
/// `unlimited` still compile), the item as written otherwise.
pub(crate) fn recover(error: &syn::Error, item: TokenStream) -> TokenStream {
    let mut output = error.to_compile_error();
    match Handler::parse_recovering(item.clone()) {
        Ok((handler, _)) => {
            let no_limit = quote!(::core::unreachable!(
                "`#[rate_limit]` refused its arguments"
            ));
            output.extend(generate::handler(&handler, no_limit));
        }
        Err(_) => output.extend(item),
    }
    output
}
