//! `#[rate_limit(...)]`: a handler type whose axum `Handler` impl runs the
//! original `async fn` behind the handler's own limit layer.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;
use syn::{Attribute, Error, FnArg, ItemFn, LitStr, Type};

use crate::attr::{Algorithm, Args, Bucket, By, OnStoreError, Spec};

/// The most arguments an axum handler takes.
const MAX_ARGS: usize = 16;

/// Expands `#[rate_limit(attr)] item`; the caller re-emits `item` on error.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let spec = syn::parse2::<Args>(attr).and_then(Args::into_spec);
    let handler = syn::parse2::<ItemFn>(item)
        .map_err(|_| {
            Error::new(
                Span::call_site(),
                "`#[rate_limit]` goes on an `async fn` handler",
            )
        })
        .and_then(check_handler);
    match (spec, handler) {
        (Ok(spec), Ok(handler)) => Ok(generate(&spec, handler)),
        (Err(mut spec), Err(handler)) => {
            spec.combine(handler);
            Err(spec)
        }
        (Err(err), Ok(_)) | (Ok(_), Err(err)) => Err(err),
    }
}

/// Refuses functions that cannot become a handler type, one error per mistake.
fn check_handler(handler: ItemFn) -> syn::Result<ItemFn> {
    let sig = &handler.sig;
    let mut errors = Vec::new();
    if sig.asyncness.is_none() {
        errors.push(Error::new_spanned(
            sig.fn_token,
            "`#[rate_limit]` handlers must be `async fn`",
        ));
    }
    if let Some(unsafety) = sig.unsafety {
        errors.push(Error::new_spanned(
            unsafety,
            "`#[rate_limit]` handlers cannot be `unsafe`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(Error::new_spanned(
            abi,
            "`#[rate_limit]` handlers cannot have an `extern` ABI",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(Error::new_spanned(
            &sig.generics,
            "`#[rate_limit]` handlers cannot be generic: the handler type needs concrete extractor types",
        ));
    }
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => errors.push(Error::new_spanned(
                receiver,
                "`#[rate_limit]` handlers cannot take `self`: write a free `async fn`",
            )),
            FnArg::Typed(arg) => {
                if let Type::ImplTrait(ty) = &*arg.ty {
                    errors.push(Error::new_spanned(
                        ty,
                        "`#[rate_limit]` handlers cannot take `impl Trait`: name the extractor type",
                    ));
                }
            }
        }
    }
    if let Some(extra) = sig.inputs.iter().nth(MAX_ARGS) {
        errors.push(Error::new_spanned(
            extra,
            format!(
                "axum handlers take at most {MAX_ARGS} arguments, got {}",
                sig.inputs.len()
            ),
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(Error::new_spanned(
            variadic,
            "`#[rate_limit]` handlers cannot be variadic",
        ));
    }
    match errors.into_iter().reduce(|mut all, err| {
        all.combine(err);
        all
    }) {
        Some(err) => Err(err),
        None => Ok(handler),
    }
}

/// Whether a type names `Decision` (as in `Extension<Decision>`): the handler
/// reads the decision, so the limit puts it into the request. Other handlers
/// do not pay for it.
fn names_decision(ty: TokenStream) -> bool {
    ty.into_iter().any(|token| match token {
        proc_macro2::TokenTree::Ident(ident) => ident == "Decision",
        proc_macro2::TokenTree::Group(group) => names_decision(group.stream()),
        _ => false,
    })
}

/// Where the handler's attributes go.
struct Attrs {
    /// On the handler type: docs, `deprecated`, `cfg` and lint levels.
    on_type: Vec<Attribute>,
    /// On the `const _` block that holds the function and the impl: `cfg`
    /// and lint levels.
    on_block: Vec<Attribute>,
    /// On the original function: everything else (other attribute macros,
    /// `expect`, `must_use`...).
    on_fn: Vec<Attribute>,
}

fn split_attrs(attrs: Vec<Attribute>) -> Attrs {
    let mut split = Attrs {
        on_type: Vec::new(),
        on_block: Vec::new(),
        on_fn: Vec::new(),
    };
    for attr in attrs {
        let path = attr.path();
        if path.is_ident("doc") || path.is_ident("deprecated") {
            split.on_type.push(attr);
        } else if ["cfg", "allow", "warn", "deny", "forbid"]
            .iter()
            .any(|name| path.is_ident(name))
        {
            split.on_type.push(attr.clone());
            split.on_block.push(attr);
        } else {
            split.on_fn.push(attr);
        }
    }
    split
}

fn generate(spec: &Spec, handler: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = handler;
    let Attrs {
        on_type,
        on_block,
        on_fn,
    } = split_attrs(attrs);
    let name = &sig.ident;
    let private = quote!(::limiter_tower::__private);
    let axum = quote!(#private::axum);
    let send = quote!(::core::marker::Send);

    let types: Vec<&Type> = sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            FnArg::Typed(arg) => Some(&*arg.ty),
            FnArg::Receiver(_) => None,
        })
        .collect();
    // axum's own impls: `Handler<((),), S>` without arguments; with n, the
    // first n - 1 extract from the request parts and the last may take the body.
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

    let decision = types.iter().any(|ty| names_decision(quote!(#ty)));
    let handler_name = LitStr::new(&name.unraw().to_string(), name.span());
    let algorithm = algorithm(&private, &spec.algorithm);
    let cost = Literal::u64_unsuffixed(spec.cost);
    let by = by(&private, &spec.by);
    let key_prefix = option(spec.key_prefix.as_ref().map(|lit| quote!(#lit)));
    let message = option(spec.message.as_ref().map(|lit| quote!(#lit)));
    let on_store_error = option(spec.on_store_error.map(|policy| match policy {
        OnStoreError::Fallback(instances) => {
            quote!(#private::OnStoreError::Fallback { instances: #instances })
        }
        OnStoreError::FailOpen => quote!(#private::OnStoreError::FailOpen),
        OnStoreError::FailClosed => quote!(#private::OnStoreError::FailClosed),
    }));

    quote! {
        #(#on_type)*
        #[allow(non_camel_case_types)]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
        #vis struct #name;

        #(#on_block)*
        const _: () = {
            static __LIMIT: #private::LazyLimit = #private::LazyLimit::new(#private::HandlerSpec {
                module_path: ::core::module_path!(),
                handler: #handler_name,
                algorithm: #algorithm,
                cost: #cost,
                by: #by,
                key_prefix: #key_prefix,
                message: #message,
                on_store_error: #on_store_error,
                decision: #decision,
            });

            #(#on_fn)*
            #sig #block

            // The function as a nameable handler type, so the limited
            // handler's future can be named instead of boxed. As visible as
            // the handler, whose `Handler` impl names it.
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

                fn call(self, req: #axum::extract::Request, state: __S) -> Self::Future {
                    #axum::handler::Handler::<#tuple, __S>::call(#name, req, state)
                }
            }

            impl<#generics> #axum::handler::Handler<#tuple, __S> for #name
            where
                __S: ::core::clone::Clone + #send + ::core::marker::Sync + 'static,
                #bounds
            {
                type Future = #private::HandlerFuture<__Unlimited, #tuple, __S>;

                fn call(self, req: #axum::extract::Request, state: __S) -> Self::Future {
                    __LIMIT.call(__Unlimited, req, state)
                }
            }
        };
    }
}

fn algorithm(private: &TokenStream, algorithm: &Algorithm) -> TokenStream {
    let int = Literal::u64_unsuffixed;
    let bucket = |variant: TokenStream, size_name: TokenStream, bucket: &Bucket| {
        let (amount, period_us, size) =
            (int(bucket.amount), int(bucket.period_us), int(bucket.size));
        quote! {
            #private::AlgorithmSpec::#variant {
                amount: #amount,
                period_us: #period_us,
                #size_name: #size,
            }
        }
    };
    match algorithm {
        Algorithm::SlidingLog {
            rules,
            prevent_duplicate_us,
        } => {
            let rules = rules.iter().map(|rule| {
                let (limit, window_us) = (int(rule.limit), int(rule.window_us));
                quote!((#limit, #window_us))
            });
            let prevent_duplicate_us = option(prevent_duplicate_us.map(|us| {
                let us = int(us);
                quote!(#us)
            }));
            quote! {
                #private::AlgorithmSpec::SlidingLog {
                    rules: &[#(#rules),*],
                    prevent_duplicate_us: #prevent_duplicate_us,
                }
            }
        }
        Algorithm::FixedWindow(rule) | Algorithm::SlidingWindow(rule) => {
            let variant = match algorithm {
                Algorithm::FixedWindow(_) => quote!(FixedWindow),
                _ => quote!(SlidingWindow),
            };
            let (limit, window_us) = (int(rule.limit), int(rule.window_us));
            quote! {
                #private::AlgorithmSpec::#variant { limit: #limit, window_us: #window_us }
            }
        }
        Algorithm::TokenBucket(b) => bucket(quote!(TokenBucket), quote!(capacity), b),
        Algorithm::LeakyBucket(b) => bucket(quote!(LeakyBucket), quote!(capacity), b),
        Algorithm::Gcra(b) => bucket(quote!(Gcra), quote!(burst), b),
    }
}

fn by(private: &TokenStream, by: &By) -> TokenStream {
    match by {
        By::Ip => quote!(#private::KeySpec::Ip),
        By::User => quote!(#private::KeySpec::User),
        By::Global => quote!(#private::KeySpec::Global),
        By::Header(name) => quote!(#private::KeySpec::Header(#name)),
        // Spanned on the path, so a function of the wrong type is reported there.
        By::Custom(path) => quote_spanned!(path.span()=> #private::KeySpec::Custom(#path)),
    }
}

fn option(value: Option<TokenStream>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(attr: &str, item: &str) -> syn::Result<TokenStream> {
        expand(attr.parse().unwrap(), item.parse().unwrap())
    }

    fn error(attr: &str, item: &str) -> String {
        match expand_str(attr, item) {
            Ok(_) => panic!("`{item}` was accepted"),
            Err(err) => err
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn generates_the_handler_type() {
        let generated = expand_str(
            "rules = [(10, 60s), (20, 120s)], by = ip, prevent_duplicate",
            "/// Docs.
             pub async fn create_post(State(app): State<App>, Json(p): Json<NewPost>) -> impl IntoResponse { body }",
        )
        .unwrap();
        let expected = quote! {
            #[doc = " Docs."]
            #[allow(non_camel_case_types)]
            #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
            pub struct create_post;

            const _: () = {
                static __LIMIT: ::limiter_tower::__private::LazyLimit = ::limiter_tower::__private::LazyLimit::new(::limiter_tower::__private::HandlerSpec {
                    module_path: ::core::module_path!(),
                    handler: "create_post",
                    algorithm: ::limiter_tower::__private::AlgorithmSpec::SlidingLog {
                        rules: &[(10, 60000000), (20, 120000000)],
                        prevent_duplicate_us: ::core::option::Option::Some(5000000),
                    },
                    cost: 1,
                    by: ::limiter_tower::__private::KeySpec::Ip,
                    key_prefix: ::core::option::Option::None,
                    message: ::core::option::Option::None,
                    on_store_error: ::core::option::Option::None,
                    decision: false,
                });

                async fn create_post(State(app): State<App>, Json(p): Json<NewPost>) -> impl IntoResponse { body }

                #[doc(hidden)]
                #[derive(::core::clone::Clone, ::core::marker::Copy)]
                pub struct __Unlimited;

                impl<__M, __S> ::limiter_tower::__private::axum::handler::Handler<(__M, State<App>, Json<NewPost>,), __S> for __Unlimited
                where
                    __S: ::core::clone::Clone + ::core::marker::Send + ::core::marker::Sync + 'static,
                    __M: 'static,
                    State<App>: ::limiter_tower::__private::axum::extract::FromRequestParts<__S> + ::core::marker::Send,
                    Json<NewPost>: ::limiter_tower::__private::axum::extract::FromRequest<__S, __M> + ::core::marker::Send,
                {
                    type Future = ::core::pin::Pin<::std::boxed::Box<
                        dyn ::core::future::Future<Output = ::limiter_tower::__private::axum::response::Response> + ::core::marker::Send,
                    >>;

                    fn call(self, req: ::limiter_tower::__private::axum::extract::Request, state: __S) -> Self::Future {
                        ::limiter_tower::__private::axum::handler::Handler::<(__M, State<App>, Json<NewPost>,), __S>::call(create_post, req, state)
                    }
                }

                impl<__M, __S> ::limiter_tower::__private::axum::handler::Handler<(__M, State<App>, Json<NewPost>,), __S> for create_post
                where
                    __S: ::core::clone::Clone + ::core::marker::Send + ::core::marker::Sync + 'static,
                    __M: 'static,
                    State<App>: ::limiter_tower::__private::axum::extract::FromRequestParts<__S> + ::core::marker::Send,
                    Json<NewPost>: ::limiter_tower::__private::axum::extract::FromRequest<__S, __M> + ::core::marker::Send,
                {
                    type Future = ::limiter_tower::__private::HandlerFuture<__Unlimited, (__M, State<App>, Json<NewPost>,), __S>;

                    fn call(self, req: ::limiter_tower::__private::axum::extract::Request, state: __S) -> Self::Future {
                        __LIMIT.call(__Unlimited, req, state)
                    }
                }
            };
        };
        assert_eq!(generated.to_string(), expected.to_string());
    }

    #[test]
    fn only_handlers_that_take_the_decision_get_it() {
        let decision = |args: &str| {
            let generated = expand_str("rules = [(1, 1s)]", &format!("async fn h({args}) {{}}"))
                .unwrap()
                .to_string();
            match (
                generated.contains("decision : true"),
                generated.contains("decision : false"),
            ) {
                (true, false) => true,
                (false, true) => false,
                _ => panic!("no decision flag in {generated}"),
            }
        };
        assert!(!decision(""));
        assert!(!decision("State(s): State<App>, body: String"));
        assert!(decision("Extension(d): Extension<Decision>"));
        assert!(decision(
            "s: State<App>, d: Option<axum::Extension<limiter_tower::Decision>>"
        ));
        assert!(!decision("d: Extension<Decisions>"));
    }

    #[test]
    fn a_handler_without_arguments_is_handler_of_unit() {
        let generated = expand_str(
            r#"algorithm = gcra(rate = 100/60s, burst = 20), by = header("x-api-key"), key = "feed", message = "slow down", cost = 2"#,
            "async fn feed() -> &'static str { \"\" }",
        )
        .unwrap()
        .to_string();
        for part in [
            "impl < __S > :: limiter_tower :: __private :: axum :: handler :: Handler < (() ,) , __S > for feed",
            "algorithm : :: limiter_tower :: __private :: AlgorithmSpec :: Gcra { amount : 100 , period_us : 60000000 , burst : 20 , }",
            "by : :: limiter_tower :: __private :: KeySpec :: Header (\"x-api-key\")",
            "key_prefix : :: core :: option :: Option :: Some (\"feed\")",
            "message : :: core :: option :: Option :: Some (\"slow down\")",
            "cost : 2 ,",
            "struct feed ;",
        ] {
            assert!(generated.contains(part), "{part}\nnot in\n{generated}");
        }
    }

    #[test]
    fn attributes_are_split_between_the_type_and_the_function() {
        let generated = expand_str(
            "rules = [(1, 1s)], by = custom(keys::tenant), algorithm = fixed_window",
            "/// Docs.
             #[cfg(feature = \"x\")]
             #[allow(clippy::unused_async)]
             #[tracing::instrument]
             #[expect(unused_variables)]
             pub(crate) async fn r#type(x: String) {}",
        )
        .unwrap()
        .to_string();
        let (outside, inside) = generated.split_once("const _").unwrap();
        assert!(outside.contains(
            "# [doc = \" Docs.\"] # [cfg (feature = \"x\")] # [allow (clippy :: unused_async)]"
        ));
        assert!(outside.ends_with("pub (crate) struct r#type ; # [cfg (feature = \"x\")] # [allow (clippy :: unused_async)] "));
        assert!(!outside.contains("tracing") && !outside.contains("expect"));
        assert!(inside.contains("# [tracing :: instrument] # [expect (unused_variables)] async fn r#type (x : String) { }"));
        assert!(inside.contains("handler : \"type\""));
        assert!(
            inside.contains(
                "by : :: limiter_tower :: __private :: KeySpec :: Custom (keys :: tenant)"
            )
        );
        assert!(
            inside.contains("AlgorithmSpec :: FixedWindow { limit : 1 , window_us : 1000000 }")
        );
        assert!(inside.contains(
            "String : :: limiter_tower :: __private :: axum :: extract :: FromRequest < __S , __M >"
        ));
    }

    #[test]
    fn refuses_functions_that_cannot_be_handlers() {
        let rules = "rules = [(1, 1s)]";
        assert_eq!(
            error(rules, "fn f() {}"),
            "`#[rate_limit]` handlers must be `async fn`"
        );
        assert_eq!(
            error(rules, "async fn f(&self) {}"),
            "`#[rate_limit]` handlers cannot take `self`: write a free `async fn`"
        );
        assert_eq!(
            error(rules, "async fn f<T: Send>(t: T) {}"),
            "`#[rate_limit]` handlers cannot be generic: the handler type needs concrete extractor types"
        );
        assert_eq!(
            error(rules, "async fn f(t: impl Send) {}"),
            "`#[rate_limit]` handlers cannot take `impl Trait`: name the extractor type"
        );
        assert_eq!(
            error(rules, "async unsafe fn f() {}"),
            "`#[rate_limit]` handlers cannot be `unsafe`"
        );
        assert_eq!(
            error(rules, "struct S;"),
            "`#[rate_limit]` goes on an `async fn` handler"
        );
        let args = (0..17).map(|i| format!("a{i}: String")).collect::<Vec<_>>();
        assert_eq!(
            error(rules, &format!("async fn f({}) {{}}", args.join(", "))),
            "axum handlers take at most 16 arguments, got 17"
        );
    }

    #[test]
    fn reports_every_mistake_once() {
        assert_eq!(
            error("rules = [(0, 1s)]", "fn f(&self) {}"),
            "the limit of a rule must be at least 1, got 0\n\
             `#[rate_limit]` handlers must be `async fn`\n\
             `#[rate_limit]` handlers cannot take `self`: write a free `async fn`"
        );
    }
}
