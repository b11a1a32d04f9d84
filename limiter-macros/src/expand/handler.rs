//! The code `#[rate_limit]` expands to.
//!
//! The function's name becomes a unit struct implementing axum's `Handler`:
//! its call checks the limit, then extracts the arguments and runs the
//! function, which stays callable as `name::unlimited(...)`. Everything but
//! the struct is emitted by `__private::handler_items` on the struct, so that
//! where a struct cannot go (an `impl` block) the compiler reports that one
//! thing and nothing else.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;
use syn::{FnArg, Pat, ReturnType};

use crate::expand::tokens::private;
use crate::parse::Handler;

/// The handler type and its items. `limit` is the body of the function
/// building its `LimitLayer`.
pub(crate) fn handler(handler: &Handler, limit: TokenStream) -> TokenStream {
    let private = private();
    let Handler {
        attrs_on_type,
        attrs_on_items,
        attrs_on_fn,
        vis,
        sig,
        block,
        arg_types: _,
    } = handler;
    let name = &sig.ident;
    let unlimited = unlimited(handler);
    let handler_impls = handler_impls(handler);
    let items = quote! {
        #(#attrs_on_items)*
        const _: () = {
            #(#attrs_on_fn)*
            #sig #block

            fn __limit() -> #private::LimitLayer {
                #limit
            }

            static __LIMIT: ::std::sync::LazyLock<#private::LimitLayer> =
                ::std::sync::LazyLock::new(__limit);

            impl #name {
                /// This handler's limit, the layer in front of it: for
                /// `Control::limit`, which reads and resets its state.
                #[allow(dead_code)]
                #vis fn limit() -> #private::LimitLayer {
                    ::core::clone::Clone::clone(&*__LIMIT)
                }
            }

            #unlimited
            #handler_impls
        };
    };
    quote! {
        #[#private::handler_items { #items }]
        #(#attrs_on_type)*
        #[allow(non_camel_case_types)]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
        #vis struct #name;
    }
}

/// `name::unlimited(...)`: the function as written, for tests.
fn unlimited(handler: &Handler) -> TokenStream {
    let Handler {
        vis,
        sig,
        arg_types,
        ..
    } = handler;
    let name = &sig.ident;
    let params = param_names(handler);
    let output = &sig.output;
    let doc = format!(
        " Runs `{}` as written, without its rate limit (for unit tests).",
        name.unraw()
    );
    quote! {
        impl #name {
            #[doc = #doc]
            #[allow(dead_code, clippy::too_many_arguments)]
            #vis async fn unlimited(#(#params: #arg_types),*) #output {
                #name(#(#params),*).await
            }
        }
    }
}

/// The names the arguments take in `unlimited`: the function's own when
/// it binds a plain name, `arg{i}` otherwise.
pub(crate) fn param_names(handler: &Handler) -> Vec<Ident> {
    let plain: Vec<Option<Ident>> = handler
        .sig
        .inputs
        .iter()
        .map(|input| match input {
            FnArg::Typed(arg) => match &*arg.pat {
                Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => {
                    Some(pat.ident.clone())
                }
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    let taken = |name: &Ident| {
        *name == handler.sig.ident || plain.iter().flatten().any(|plain| plain == name)
    };
    plain
        .iter()
        .enumerate()
        .map(|(i, name)| match name {
            Some(name) if *name != handler.sig.ident => name.clone(),
            _ => {
                let mut name = format_ident!("arg{i}");
                while taken(&name) {
                    name = format_ident!("{name}_");
                }
                name
            }
        })
        .collect()
}

/// The function as an axum `Handler` (`__Unlimited`, extracting the
/// arguments as axum's own impls do), and the handler type: the limit in
/// front of it.
fn handler_impls(handler: &Handler) -> TokenStream {
    let private = private();
    let axum = quote!(#private::axum);
    let send = quote!(::core::marker::Send);
    let (vis, name) = (&handler.vis, &handler.sig.ident);
    let types = &handler.arg_types;

    // axum's own impls: `Handler<((),), S>` without arguments; with n, the
    // first n - 1 extract from the request's parts and the last may take
    // the body, through `M`.
    let (generics, tuple, bounds) = match types.split_last() {
        None => (quote!(__S), quote!(((),)), quote!()),
        Some((last, parts)) => {
            let parts = parts.iter().map(|ty| {
                quote_spanned!(ty.span()=> #ty: #axum::extract::FromRequestParts<__S> + #send,)
            });
            let last =
                quote_spanned!(last.span()=> #last: #axum::extract::FromRequest<__S, __M> + #send,);
            (
                quote!(__M, __S),
                quote!((__M, #(#types,)*)),
                quote!(__M: 'static, #(#parts)* #last),
            )
        }
    };
    let call = extract_and_call(handler);
    quote! {
        // The function as a nameable handler, so that the limited handler's
        // future can be named instead of boxed. As visible as the handler,
        // whose `Handler` impl names it.
        #[doc(hidden)]
        #[derive(::core::clone::Clone, ::core::marker::Copy)]
        #vis struct __Unlimited;

        impl<#generics> #axum::handler::Handler<#tuple, __S> for __Unlimited
        where
            __S: ::core::clone::Clone + #send + ::core::marker::Sync + 'static,
            #bounds
        {
            type Future = ::core::pin::Pin<::std::boxed::Box<
                dyn ::core::future::Future<Output = #axum::response::Response> + #send,
            >>;

            #call
        }

        impl<#generics> #axum::handler::Handler<#tuple, __S> for #name
        where
            __S: ::core::clone::Clone + #send + ::core::marker::Sync + 'static,
            #bounds
        {
            type Future = #private::HandlerFuture<__Unlimited, #tuple, __S>;

            fn call(self, request: #axum::extract::Request, state: __S) -> Self::Future {
                #private::call(&__LIMIT, __Unlimited, request, state)
            }
        }
    }
}

/// `Handler::call` of `__Unlimited`: each argument extracted in order (a
/// rejection is the response), then the function, its output turned into
/// the response.
fn extract_and_call(handler: &Handler) -> TokenStream {
    let private = private();
    let axum = quote!(#private::axum);
    let into_response = quote!(#axum::response::IntoResponse::into_response);
    let name = &handler.sig.ident;
    let args: Vec<Ident> = (0..handler.arg_types.len())
        .map(|i| format_ident!("__arg{i}"))
        .collect();
    // An output that is not a response is reported on the return type.
    let output_span = match &handler.sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => name.span(),
    };
    let respond = quote_spanned!(output_span=> #into_response(__output));
    let run = quote! {
        let __output = #name(#(#args),*).await;
        #respond
    };
    let boxed = quote_spanned!(name.span()=> ::std::boxed::Box::pin);
    let (Some((last_type, part_types)), Some((last, parts))) =
        (handler.arg_types.split_last(), args.split_last())
    else {
        return quote! {
            fn call(self, _request: #axum::extract::Request, _state: __S) -> Self::Future {
                #boxed(async move { #run })
            }
        };
    };
    let extract = |future: TokenStream| {
        quote! {
            match #future.await {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(rejection) => return #into_response(rejection),
            }
        }
    };
    let parts_mut = (!parts.is_empty()).then(|| quote!(mut));
    let parts = parts.iter().zip(part_types).map(|(arg, ty)| {
        let value = extract(quote_spanned! {ty.span()=>
            <#ty as #axum::extract::FromRequestParts<__S>>::from_request_parts(&mut __parts, &__state)
        });
        quote!(let #arg = #value;)
    });
    let last_value = extract(quote_spanned! {last_type.span()=>
        <#last_type as #axum::extract::FromRequest<__S, __M>>::from_request(__request, &__state)
    });
    quote! {
        fn call(self, __request: #axum::extract::Request, __state: __S) -> Self::Future {
            let (#parts_mut __parts, __body) = __request.into_parts();
            #boxed(async move {
                #(#parts)*
                let __request = #axum::extract::Request::from_parts(__parts, __body);
                let #last = #last_value;
                #run
            })
        }
    }
}
