//! What the attribute generates, and what it refuses.

use proc_macro2::TokenStream;
use quote::quote;

use crate::parse::Handler;
use crate::{expand, rate_limit_tokens, recover};

fn expand_str(attr: &str, item: &str) -> syn::Result<TokenStream> {
    rate_limit_tokens(attr.parse().unwrap(), item.parse().unwrap())
}

fn generated(attr: &str, item: &str) -> String {
    match expand_str(attr, item) {
        Ok(tokens) => tokens.to_string(),
        Err(err) => panic!("`{item}` was refused: {err}"),
    }
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

/// The part of `generates_the_handler_type`'s expansion that makes
/// `ping(body: String) -> String` an axum handler, limited.
fn ping_as_handler() -> TokenStream {
    quote! {
        #[doc(hidden)]
        #[derive(::core::clone::Clone, ::core::marker::Copy)]
        pub struct __Unlimited;

        impl<__M, __S> ::limiter_tower::__private::axum::handler::Handler<(__M, String,), __S> for __Unlimited
        where
            __S: ::core::clone::Clone + ::core::marker::Send + ::core::marker::Sync + 'static,
            __M: 'static,
            String: ::limiter_tower::__private::axum::extract::FromRequest<__S, __M> + ::core::marker::Send,
        {
            type Future = ::core::pin::Pin<::std::boxed::Box<
                dyn ::core::future::Future<Output = ::limiter_tower::__private::axum::response::Response> + ::core::marker::Send,
            >>;

            fn call(self, __request: ::limiter_tower::__private::axum::extract::Request, __state: __S) -> Self::Future {
                let (__parts, __body) = __request.into_parts();
                ::std::boxed::Box::pin(async move {
                    let __request = ::limiter_tower::__private::axum::extract::Request::from_parts(__parts, __body);
                    let __arg0 = match <String as ::limiter_tower::__private::axum::extract::FromRequest<__S, __M>>::from_request(__request, &__state).await {
                        ::core::result::Result::Ok(value) => value,
                        ::core::result::Result::Err(rejection) => return ::limiter_tower::__private::axum::response::IntoResponse::into_response(rejection),
                    };
                    let __output = ping(__arg0).await;
                    ::limiter_tower::__private::axum::response::IntoResponse::into_response(__output)
                })
            }
        }

        impl<__M, __S> ::limiter_tower::__private::axum::handler::Handler<(__M, String,), __S> for ping
        where
            __S: ::core::clone::Clone + ::core::marker::Send + ::core::marker::Sync + 'static,
            __M: 'static,
            String: ::limiter_tower::__private::axum::extract::FromRequest<__S, __M> + ::core::marker::Send,
        {
            type Future = ::limiter_tower::__private::HandlerFuture<__Unlimited, (__M, String,), __S>;

            fn call(self, request: ::limiter_tower::__private::axum::extract::Request, state: __S) -> Self::Future {
                ::limiter_tower::__private::call(&__LIMIT, __Unlimited, request, state)
            }
        }
    }
}

#[test]
fn generates_the_handler_type() {
    let ping_as_handler = ping_as_handler();
    let expected = quote! {
        #[::limiter_tower::__private::handler_items {
            const _: () = {
                async fn ping(body: String) -> String { body }

                fn __limit() -> ::limiter_tower::__private::LimitLayer {
                    fn __policy() -> ::core::result::Result<
                        ::limiter_tower::__private::Policy,
                        ::limiter_tower::__private::ConfigError
                    > {
                        let policy = ::limiter_tower::__private::Policy::sliding_log([
                            ::limiter_tower::__private::Rule::new(1, ::core::time::Duration::from_secs(1))?
                        ])?;
                        ::core::result::Result::Ok(policy)
                    }
                    ::limiter_tower::__private::LimitLayer::new(
                        ::limiter_tower::__private::limit_name(::core::module_path!(), "ping"),
                        ::limiter_tower::__private::proven(__policy()),
                        ::limiter_tower::__private::KeySource::global(),
                    )
                    .decision_extension(false)
                    .message("slow down")
                }

                static __LIMIT: ::std::sync::LazyLock<::limiter_tower::__private::LimitLayer> =
                    ::std::sync::LazyLock::new(__limit);

                impl ping {
                    /// This handler's limit, the layer in front of it: for
                    /// `Control::limit`, which reads and resets its state.
                    #[allow(dead_code)]
                    pub fn limit() -> ::limiter_tower::__private::LimitLayer {
                        ::core::clone::Clone::clone(&*__LIMIT)
                    }
                }

                impl ping {
                    #[doc = " Runs `ping` as written, without its rate limit (for unit tests)."]
                    #[allow(dead_code, clippy::too_many_arguments)]
                    pub async fn unlimited(body: String) -> String {
                        ping(body).await
                    }
                }

                #ping_as_handler
            };
        }]
        #[doc = " Answers."]
        #[allow(non_camel_case_types)]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
        pub struct ping;
    };
    assert_eq!(
        generated(
            r#"rules = [(1, 1s)], by = global, message = "slow down""#,
            "/// Answers.\npub async fn ping(body: String) -> String { body }",
        ),
        expected.to_string()
    );
}

#[test]
fn arguments_are_extracted_in_order() {
    let generated = generated(
        "rules = [(1, 1s)]",
        "async fn reply(State(app): State<App>, Path(id): Path<u64>, body: String) {}",
    );
    let (parts, rest) = generated.split_once("let __request").unwrap();
    let first = parts.find("< State < App > as").unwrap();
    let second = parts.find("< Path < u64 > as").unwrap();
    assert!(first < second, "{parts}");
    assert!(parts.contains("let (mut __parts , __body)"));
    assert!(rest.contains("< String as :: limiter_tower :: __private :: axum :: extract :: FromRequest < __S , __M >> :: from_request (__request , & __state)"));
    assert!(rest.contains("let __output = reply (__arg0 , __arg1 , __arg2) . await ;"));
    assert!(generated.contains(
        "async fn unlimited (arg0 : State < App > , arg1 : Path < u64 > , body : String) { reply (arg0 , arg1 , body) . await }"
    ));
}

#[test]
fn a_handler_without_arguments_is_handler_of_unit() {
    let generated = generated(
        r#"algorithm = gcra(rate = 100/60s, burst = 20), by = header("x-api-key"), key = "feed", cost = 2"#,
        "async fn feed() -> &'static str { \"\" }",
    );
    for part in [
        "impl < __S > :: limiter_tower :: __private :: axum :: handler :: Handler < (() ,) , __S > for feed",
        "fn call (self , _request : :: limiter_tower :: __private :: axum :: extract :: Request , _state : __S)",
        "KeySource :: header (:: limiter_tower :: __private :: http :: HeaderName :: from_static (\"x-api-key\"))",
        ". key_prefix (\"feed\")",
        ". with_cost (2) ?",
        "async fn unlimited () -> & 'static str { feed () . await }",
    ] {
        assert!(generated.contains(part), "{part}\nnot in\n{generated}");
    }
}

#[test]
fn only_handlers_that_take_the_decision_get_it() {
    let decision = |args: &str| {
        let generated = generated("rules = [(1, 1s)]", &format!("async fn h({args}) {{}}"));
        match (
            generated.contains("decision_extension (true)"),
            generated.contains("decision_extension (false)"),
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
fn attributes_are_split_between_the_type_and_the_function() {
    let generated = generated(
        "rules = [(1, 1s)], by = custom(keys::tenant), on_store_error = fallback(instances = 3)",
        "/// Docs.
         #[cfg(feature = \"x\")]
         #[allow(clippy::unused_async)]
         #[tracing::instrument]
         #[expect(unused_variables)]
         pub(crate) async fn r#type(x: String) {}",
    );
    let (items, handler_type) = generated.rsplit_once("}]").unwrap();
    assert_eq!(
        handler_type.trim(),
        "# [doc = \" Docs.\"] # [cfg (feature = \"x\")] # [allow (clippy :: unused_async)] \
         # [allow (non_camel_case_types)] \
         # [derive (:: core :: clone :: Clone , :: core :: marker :: Copy , :: core :: fmt :: Debug)] \
         pub (crate) struct r#type ;"
    );
    assert!(items.contains(
        "# [cfg (feature = \"x\")] # [allow (clippy :: unused_async)] const _ : () = { \
         # [tracing :: instrument] # [expect (unused_variables)] async fn r#type (x : String) { }"
    ));
    assert!(items.contains("limit_name (:: core :: module_path ! () , \"type\")"));
    assert!(items.contains(
        "# [doc = \" Runs `type` as written, without its rate limit (for unit tests).\"]"
    ));
    assert!(items.contains("let resolve : fn (& :: limiter_tower :: __private :: http :: request :: Parts) -> :: core :: option :: Option < :: std :: string :: String > = keys :: tenant ; resolve"));
    assert!(items.contains(
        ". on_store_error (:: limiter_tower :: __private :: OnStoreError :: Fallback { instances : 3 })"
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
        error(rules, "async extern \"C\" fn f() {}"),
        "`#[rate_limit]` handlers cannot have an `extern` ABI"
    );
    assert_eq!(
        error(rules, "struct S;"),
        "`#[rate_limit]` goes on an `async fn` handler"
    );
}

#[test]
fn reports_every_mistake_at_once() {
    assert_eq!(
        error("rules = [(0, 1s)]", "async fn f(&self, t: impl Send) {}"),
        "the limit of a rule must be at least 1, got 0 (window 1s)\n\
         `#[rate_limit]` handlers cannot take `self`: write a free `async fn`\n\
         `#[rate_limit]` handlers cannot take `impl Trait`: name the extractor type"
    );
    assert_eq!(
        error("rules = [(1, 1s)], cost = 2", "fn f() {}"),
        "a cost of 2 can never pass: it exceeds the limit of rule 1-per-1s of 1\n\
         `#[rate_limit]` handlers must be `async fn`"
    );
}

#[test]
fn a_mistake_leaves_a_handler_that_compiles() {
    let recovered = |attr: &str, item: &str| {
        let item: TokenStream = item.parse().unwrap();
        let error = rate_limit_tokens(attr.parse().unwrap(), item.clone()).unwrap_err();
        recover(&error, item).to_string()
    };
    // The handler without its limit, the function made `async`.
    let output = recovered("rules = [(0, 1s)]", "fn f() -> u8 { 1 }");
    assert!(output.starts_with(":: core :: compile_error !"), "{output}");
    assert!(output.contains("async fn f () -> u8 { 1 }"));
    assert!(output.contains(
        "fn __limit () -> :: limiter_tower :: __private :: LimitLayer { :: core :: unreachable !"
    ));
    assert!(output.contains("async fn unlimited () -> u8"));
    assert!(output.ends_with("struct f ;"));
    // Nothing to generate: the item as written.
    let output = recovered("rules = [(1, 1s)]", "async fn f<T>(t: T) {}");
    assert!(output.ends_with("async fn f < T > (t : T) { }"), "{output}");
    let output = recovered("rules = [(1, 1s)]", "struct S;");
    assert!(output.ends_with("struct S ;"), "{output}");
}

#[test]
fn unlimited_takes_the_plain_names() {
    let names = |item: &str| {
        let handler = Handler::parse(item.parse().unwrap()).unwrap();
        expand::param_names(&handler)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(names("async fn f() {}"), Vec::<String>::new());
    assert_eq!(
        names("async fn f(mut body: String, _: Method, Path(id): Path<u64>, arg1: Uri) {}"),
        ["body", "arg1_", "arg2", "arg1"]
    );
    // The function's own name would hide it from the call.
    assert_eq!(names("async fn f(f: String) {}"), ["arg0"]);
}
