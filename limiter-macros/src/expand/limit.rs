//! The handler's limit: the body of `fn __limit() -> LimitLayer`, building
//! the checked policy (or concurrency limit) and calling the setters of the
//! other arguments.

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::LitStr;
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;

use crate::check::{Layer, Limit};
use crate::expand::business;
use crate::expand::policy::policy;
use crate::expand::tokens::private;
use crate::parse::{By, Handler, OnStoreError};

/// The body of `fn __limit() -> LimitLayer` for `handler`.
pub(crate) fn limit(limit: &Limit<'_>, handler: &Handler) -> TokenStream {
    let private = private();
    let ident = &handler.sig.ident;
    let name = LitStr::new(&ident.unraw().to_string(), ident.span());
    let name = quote!(#private::limit_name(::core::module_path!(), #name));
    let source = key_source(limit.by);
    let (items, layer) = match &limit.layer {
        Layer::Rate(checked) => {
            let policy = policy(checked);
            (
                quote! {
                    fn __policy() -> ::core::result::Result<#private::Policy, #private::ConfigError> {
                        let policy = #policy;
                        ::core::result::Result::Ok(policy)
                    }
                },
                quote! {
                    #private::LimitLayer::new(
                        #name,
                        #private::proven(__policy()),
                        #source,
                    )
                },
            )
        }
        Layer::Concurrency(max) => (
            TokenStream::new(),
            quote! {
                #private::LimitLayer::concurrent(
                    #name,
                    #private::proven(#private::ConcurrencyLimit::new(#max)),
                    #source,
                )
            },
        ),
    };
    let setters = setters(limit, handler);
    let layer = quote! {
        #layer
        #setters
    };
    // Checked through limiter-model when the attribute expanded.
    let layer = match &limit.business.counting {
        Some(counting) => {
            let counts = business::counts(counting);
            quote!(#private::proven((#layer).count_when(#counts)))
        }
        None => layer,
    };
    quote! {
        #items
        #layer
    }
}

/// `KeySource`: whose requests share the limit.
fn key_source(by: Option<&By>) -> TokenStream {
    let private = private();
    match by {
        None | Some(By::Ip) => quote!(#private::KeySource::ip()),
        Some(By::User) => quote!(#private::KeySource::user()),
        Some(By::UserOrIp) => quote!(#private::KeySource::user_or_ip()),
        Some(By::Global) => quote!(#private::KeySource::global()),
        Some(By::Header(name)) => {
            quote!(#private::KeySource::header(#private::http::HeaderName::from_static(#name)))
        }
        // Typed on the path, so a function of another signature is reported there.
        Some(By::Custom(path)) => quote_spanned! {path.span()=>
            #private::KeySource::custom({
                let resolve: fn(&#private::http::request::Parts) -> ::core::option::Option<::std::string::String> = #path;
                resolve
            })
        },
    }
}

/// The setter calls after the constructor: the decision, the key prefix,
/// the message, the failure policy, then the business arguments.
fn setters(limit: &Limit<'_>, handler: &Handler) -> TokenStream {
    let private = private();
    let decision = handler.takes_decision();
    let key_prefix = limit.key.map(|prefix| quote!(.key_prefix(#prefix)));
    let message = limit.message.map(|message| quote!(.message(#message)));
    let on_store_error = limit.on_store_error.map(|policy| {
        let policy = match policy {
            OnStoreError::Fallback(instances) => {
                let instances = Literal::u32_unsuffixed(*instances);
                quote!(#private::OnStoreError::Fallback { instances: #instances })
            }
            OnStoreError::FailOpen => quote!(#private::OnStoreError::FailOpen),
            OnStoreError::FailClosed => quote!(#private::OnStoreError::FailClosed),
        };
        quote!(.on_store_error(#policy))
    });
    let calls = business::calls(&limit.business);
    quote! {
        .decision_extension(#decision)
        #key_prefix
        #message
        #on_store_error
        #calls
    }
}
