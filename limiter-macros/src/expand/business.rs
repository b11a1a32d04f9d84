//! The checked business arguments as `LimitLayer` setter calls. A function
//! argument is typed where it is written, so that a function of another
//! signature is reported on its path.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::LitStr;
use syn::spanned::Spanned as _;

use crate::check::{Business, Counting, Wait};
use crate::expand::tokens::private;
use crate::parse::PenaltyLit;

/// The setter calls, in the order the layer's docs list them.
pub(crate) fn calls(business: &Business<'_>) -> TokenStream {
    let core = private();
    let mut calls = TokenStream::new();
    if let Some(path) = business.plans {
        calls.extend(quote_spanned! {path.span()=>
            .plans({
                let plan_of: fn(&#core::http::request::Parts) -> ::core::option::Option<#core::Plan> = #path;
                plan_of
            })
        });
    }
    if let Some(path) = business.cost {
        calls.extend(quote_spanned! {path.span()=>
            .cost({
                let cost_of: fn(&#core::http::request::Parts) -> u64 = #path;
                cost_of
            })
        });
    }
    if let Some(allow) = business.allow {
        let nets = listed_nets(allow);
        calls.extend(quote!(.allow_ips([#(#nets),*])));
    }
    if let Some(identities) = business.allow_identities {
        calls.extend(quote!(.allow_identities([#(#identities),*])));
    }
    if let Some(deny) = business.deny {
        let nets = listed_nets(deny);
        calls.extend(quote!(.deny_ips([#(#nets),*])));
    }
    if let Some(identities) = business.deny_identities {
        calls.extend(quote!(.deny_identities([#(#identities),*])));
    }
    if business.shadow {
        calls.extend(quote!(.shadow(true)));
    }
    if let Some(penalty) = business.penalty {
        calls.extend(self::penalty(penalty));
    }
    if let Some(wait) = &business.wait {
        calls.extend(self::wait(wait));
    }
    if let Some(max) = business.concurrency {
        calls.extend(quote!(.concurrency(#core::proven(#core::ConcurrencyLimit::new(#max)))));
    }
    calls
}

/// `LimitLayer::count_when`'s argument.
pub(crate) fn counts(counting: &Counting<'_>) -> TokenStream {
    let core = private();
    match counting {
        Counting::When(path) => quote_spanned! {path.span()=>
            {
                let counts: fn(#core::http::StatusCode, &#core::http::HeaderMap) -> bool = #path;
                counts
            }
        },
        Counting::Failures => quote!(#core::counts_failures),
    }
}

/// The networks of `allow` or `deny`, parsed at run time as they were here.
fn listed_nets(list: &[LitStr]) -> impl Iterator<Item = TokenStream> + '_ {
    let core = private();
    list.iter()
        .map(move |text| quote!(#core::listed_net(#text)))
}

fn penalty(penalty: &PenaltyLit) -> TokenStream {
    let core = private();
    let PenaltyLit {
        after,
        within,
        blocks,
        ..
    } = penalty;
    quote! {
        .penalty(#core::proven(#core::Penalty::new(#after, #within, [#(#blocks),*])))
    }
}

/// `.wait(..)`, then `.wait_when(..)` when only some requests wait.
fn wait(wait: &Wait<'_>) -> TokenStream {
    let core = private();
    let max = wait.max;
    let mut calls = quote!(.wait(#core::proven(#core::MaxWait::new(#max))));
    if let Some(path) = wait.when {
        calls.extend(quote_spanned! {path.span()=>
            .wait_when({
                let waits: fn(&#core::http::request::Parts) -> bool = #path;
                waits
            })
        });
    }
    calls
}
