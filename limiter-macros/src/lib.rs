//! The `#[rate_limit(...)]` attribute for [`limiter-tower`]: one annotation
//! puts an axum handler behind its own rate limit, checked when the crate
//! compiles.
//!
//! Use it as `limiter_tower::rate_limit` (limiter-tower's default `macros`
//! feature): the code it generates names limiter-tower's items, so this crate
//! does not work alone. [`macro@rate_limit`] describes every argument.
//!
//! ```
//! use axum::{Router, body::Body, http::Request, routing::post};
//! use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};
//! use tower::ServiceExt as _;
//!
//! #[rate_limit(rules = [(1, 60s)], by = global)]
//! async fn create_post() -> &'static str {
//!     "created"
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let app = Router::new()
//!     .route("/posts", post(create_post))
//!     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
//!
//! let request = || Request::post("/posts").body(Body::empty());
//! assert_eq!(app.clone().oneshot(request()?).await?.status(), 200);
//! assert_eq!(app.oneshot(request()?).await?.status(), 429); // one a minute
//! # Ok(())
//! # }
//! ```
//!
//! [`limiter-tower`]: https://docs.rs/limiter-tower
//!
//! # How it expands
//!
//! Three stages, one way: each module below uses only modules listed above
//! it, and a stage's root uses the modules listed under it.
//!
//! - `parse`: the arguments and the function into typed structs that keep
//!   their tokens for errors; the syntax alone is judged, no code written.
//!   - `syntax`: the shared `name = value, ...` list and its errors.
//!   - `values`: integers, durations, rules, rates, key prefixes, header names.
//!   - `algorithm`: `algorithm = ...`, a bucket's rate and size.
//!   - `hot`: `lease`, `shards`, `sample`.
//!   - `penalty`: `penalty(after = .., within = .., block = ..)`.
//!   - `business`: `plans`, `allow`, `wait`, `concurrency`... (uses `penalty`).
//!   - `args`: the whole argument list.
//!   - `handler`: the annotated `async fn`.
//! - `check`: the parsed arguments judged by limiter-model, into a `Limit`.
//!   - `hot`: the hot-key mode on a policy.
//!   - `policy`: the policy, through limiter-model's constructors.
//!   - `business`: the business arguments, and against each other.
//! - `expand`: the checked `Limit` and the function written out (`quote`).
//!   - `tokens`: the path to limiter-tower's items; values as expressions.
//!   - `policy`: the policy's constructor calls, made again at run time.
//!   - `business`: the business arguments' setter calls.
//!   - `limit`: the handler's `LimitLayer`.
//!   - `handler`: the handler type around the function and its limit.

use proc_macro::TokenStream;

mod check;
mod expand;
mod parse;
#[cfg(test)]
mod tests;

/// Limits how often an axum handler runs.
///
/// Every argument is checked when the crate compiles, by the constructors of
/// limiter-model that build the policy at run time (`Rule::new`,
/// `Policy::sliding_log`, `with_cost`...): an attribute that compiles builds
/// its policy. The check runs in a Tower layer in front of the handler, so a
/// denied request is answered `429 Too Many Requests` before any extractor
/// runs and before its body is read. The store, the responses and how
/// clients are identified come from the router's `LimiterLayer`.
///
/// ```
/// use axum::{Router, extract::State, routing::post};
/// use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};
///
/// #[derive(Clone)]
/// struct App;
///
/// /// Publishes a post.
/// #[rate_limit(rules = [(10, 60s), (20, 120s)], by = ip, prevent_duplicate)]
/// pub async fn create_post(State(app): State<App>, body: String) -> &'static str {
///     "created"
/// }
///
/// let app: Router = Router::new()
///     .route("/posts", post(create_post)) // routed like any handler
///     .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())))
///     .with_state(App);
/// ```
///
/// The attribute goes on a free `async fn` whose arguments are extractors
/// (no generics, no `self`, not in an `impl` block). It becomes a unit struct
/// of the same name and visibility, carrying the function's docs, that
/// implements axum's `Handler`: `post(create_post)` works as before.
///
/// # Calling the function
///
/// The function as written, without its limit, is `name::unlimited`: call
/// it from unit tests as you would have called the function.
///
/// ```
/// use axum::extract::Path;
/// use limiter_tower::rate_limit;
///
/// #[rate_limit(rules = [(5, 60s)], by = user)]
/// async fn reply(Path(post): Path<u64>, body: String) -> String {
///     format!("reply to {post}: {body}")
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let sent = reply::unlimited(Path(7), "thanks".to_owned()).await;
/// assert_eq!(sent, "reply to 7: thanks");
/// # }
/// ```
///
/// # With `#[axum::debug_handler]`
///
/// Put it below `#[rate_limit]`, on the function it checks:
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(10, 60s)])]
/// #[axum::debug_handler]
/// async fn create_post(body: String) -> String {
///     body
/// }
/// ```
///
/// Above it, it would check the handler type, which is not a function, and
/// the compiler answers "expected function". Its messages are the ones to
/// read when an argument is not an extractor: without it, the compiler
/// only says that the handler type does not implement `Handler` where it is
/// routed.
///
/// # Arguments
///
/// Separated by commas, each at most once, in any order.
///
/// ## `rules = [(limit, window), ...]`
///
/// At most `limit` requests in any `window`. A window is an integer with a
/// unit: `ms`, `s`, `m` (minutes), `h` or `d`, up to 366 days. One to six
/// rules, all checked (and counted) at once. Required by the sliding log (the
/// default algorithm), the fixed window and the sliding window.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(2, 500ms), (10, 60s), (100, 1h), (1000, 1d)])]
/// async fn create_post() {}
/// ```
///
/// ## `by = ...`
///
/// Whose requests share a limit. **`ip` when omitted.**
///
/// | value | counts by |
/// |---|---|
/// | `ip` | the client's IP address (the peer, or behind trusted proxies the forwarded client) |
/// | `user` | the user the `LimiterLayer`'s user resolver finds |
/// | `user_or_ip` | the user when the resolver finds one (signed in), else the client's IP address; each keeps its kind (its own count, blocks and admin routes) |
/// | `global` | nothing: one limit for every client together |
/// | `header("x-api-key")` | the value of a request header; the name is a valid header name in lowercase |
/// | `custom(path::to::function)` | what your `fn(&http::request::Parts) -> Option<String>` returns; the client's address as `ip` finds it is in the parts' extensions (`limiter_tower::ClientAddress`) |
///
/// ```
/// # use limiter_tower::rate_limit;
/// use axum::http::request::Parts;
///
/// #[rate_limit(rules = [(5, 60s)], by = user)]
/// async fn reply() {}
///
/// #[rate_limit(rules = [(1000, 1h)], by = header("x-api-key"))]
/// async fn search() {}
///
/// #[rate_limit(rules = [(100, 60s)], by = global)]
/// async fn status() {}
///
/// fn tenant(parts: &Parts) -> Option<String> {
///     parts.headers.get("x-tenant")?.to_str().ok().map(str::to_owned)
/// }
///
/// #[rate_limit(rules = [(100, 1m)], by = custom(tenant))]
/// async fn export() {}
/// ```
///
/// ## `prevent_duplicate`, `prevent_duplicate = window`
///
/// Adds the rule "1 request per 5 s" (or per `window`), so the same request
/// cannot be sent twice in a row. Sliding log only; it is one of the six
/// rules.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(10, 60s)], prevent_duplicate)]
/// async fn create_post() {}
///
/// #[rate_limit(rules = [(10, 60s)], prevent_duplicate = 3s)]
/// async fn create_comment() {}
/// ```
///
/// ## `algorithm = ...`
///
/// | value | limited by |
/// |---|---|
/// | `sliding_log` (the default) | `rules`, one to six |
/// | `fixed_window` | `rules`, exactly one |
/// | `sliding_window` | `rules`, exactly one |
/// | `token_bucket(rate = 1/s, burst = 10)` | a refill rate and the bucket's capacity |
/// | `leaky_bucket(rate = 2/s, capacity = 5)` | a leak rate and the bucket's capacity |
/// | `gcra(rate = 100/60s, burst = 20)` | a rate, and how many may pass at once |
///
/// A rate is an amount per unit (`1/s`, `30/m`) or per duration (`100/60s`).
/// The buckets and GCRA take no `rules`.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(algorithm = fixed_window, rules = [(100, 1m)])]
/// async fn login() {}
///
/// #[rate_limit(algorithm = sliding_window, rules = [(10_000, 1h)])]
/// async fn feed() {}
///
/// #[rate_limit(algorithm = token_bucket(rate = 1/s, burst = 10), by = user)]
/// async fn like() {}
///
/// #[rate_limit(algorithm = leaky_bucket(rate = 2/s, capacity = 5))]
/// async fn upload() {}
///
/// #[rate_limit(algorithm = gcra(rate = 100/60s, burst = 20))]
/// async fn timeline() {}
/// ```
///
/// ## `cost = n`
///
/// What one request counts for (1 when omitted): `n` entries in the log, `n`
/// tokens. At most the smallest rule limit, the capacity or the burst, since
/// a costlier request could never pass.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(algorithm = token_bucket(rate = 10/s, burst = 100), cost = 10)]
/// async fn bulk_import() {}
/// ```
///
/// ## `key = "prefix"`
///
/// Replaces the layer's key prefix (`rate_limit`) in this handler's keys,
/// `{prefix}:{identity}:{module}-{handler}`. Not empty, no braces, no
/// whitespace.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(3, 1h)], key = "signup")]
/// async fn sign_up() {}
/// ```
///
/// ## `message = "..."`
///
/// The body of the 429 response, instead of the RFC 9457
/// `application/problem+json` body.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(5, 60s)], by = user, message = "You are replying too fast.")]
/// async fn reply() {}
/// ```
///
/// ## `on_store_error = fallback | fallback(instances = N) | fail_open | fail_closed`
///
/// What this handler decides when the shared store (Redis) is slow or down,
/// instead of the layer's policy
/// ([`LimiterLayer::on_store_error`](../limiter_tower/struct.LimiterLayer.html#method.on_store_error)):
/// a local limiter with the same rules (each limit divided by `instances`),
/// letting requests through, or refusing them with 503 and `Retry-After`.
///
/// ```
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(3, 1m)], by = ip, on_store_error = fail_closed)]
/// async fn pay() {}
///
/// #[rate_limit(rules = [(100, 1m)], by = ip, on_store_error = fallback(instances = 4))]
/// async fn search() {}
/// ```
///
/// ## Limits that follow the business
///
/// | argument | does |
/// |---|---|
/// | `plans = path::to::fn` | `fn(&http::request::Parts) -> Option<Plan>`: the request's plan's policy, `None` for this handler's |
/// | `cost = path::to::fn` | `fn(&http::request::Parts) -> u64`: the request's cost (0: not checked) |
/// | `allow = ["10.0.0.0/8", "192.0.2.7"]` | clients (found as for `by = ip`) this limit does not hold |
/// | `allow_identities = ["partner"]` | identities (this limit's `by`) it does not hold |
/// | `shadow` | checked and counted, never denied |
/// | `wait = 2s` | waits up to 2 s for the retry time instead of answering 429 |
/// | `wait_when = path::to::fn` | `fn(&http::request::Parts) -> bool`: only these requests wait |
/// | `concurrency = 2` | at most 2 requests of one identity in flight (alone: no `rules` needed) |
/// | `deny = ["203.0.113.0/24"]`, `deny_identities = ["spammer"]` | refused with 403 |
/// | `penalty(after = 3, within = 10m, block = [15m, 1h])` | after 3 denials within 10 min the identity is blocked 15 min, then 1 h on the next offence |
/// | `count_when = path::to::fn` | `fn(http::StatusCode, &http::HeaderMap) -> bool`: only the responses it answers `true` for count; the others are given back |
/// | `count_failures` | only responses of status 400 or more count (a failed login); a response limiter made itself (another limit's 429, a block) never counts |
///
/// Counting by outcome records each request when it is admitted (so
/// concurrent requests count while in flight) and gives it back once its
/// response says it does not count; it needs an algorithm that gives a
/// request back exactly (the sliding log, the default, or a window
/// counter): with a bucket or GCRA it is a compile error.
///
/// ```
/// use axum::http::request::Parts;
/// use limiter_tower::{Plan, rate_limit};
///
/// fn plan_of(parts: &Parts) -> Option<Plan> {
///     parts.extensions.get::<Plan>().cloned()
/// }
///
/// fn wants_to_wait(parts: &Parts) -> bool {
///     parts.uri.query() == Some("wait=1")
/// }
///
/// #[rate_limit(rules = [(10, 60s)], by = header("x-api-key"), plans = plan_of, allow = ["10.0.0.0/8"])]
/// async fn search() {}
///
/// #[rate_limit(rules = [(5, 60s)], by = user, wait = 2s, wait_when = wants_to_wait, shadow)]
/// async fn reply() {}
///
/// #[rate_limit(concurrency = 2, by = user)]
/// async fn export() {}
///
/// // At most 5 failed logins a minute per client; a correct password never counts.
/// #[rate_limit(rules = [(5, 60s)], by = ip, count_failures)]
/// async fn login() -> axum::http::StatusCode {
///     axum::http::StatusCode::UNAUTHORIZED
/// }
/// ```
///
/// # The decision in the handler
///
/// A handler that takes `Extension<Decision>` (any argument whose type names
/// `Decision`) receives what the limiter decided for its request: the
/// remaining quota of each rule, when it resets. Only such handlers get it:
/// putting it into the request costs about as much as the memory store's
/// check. A type alias or an extractor of your own that reads it from the
/// request's extensions is not seen; name `Decision` in the handler's
/// arguments instead.
///
/// ```
/// use axum::Extension;
/// use limiter_tower::{Decision, rate_limit};
///
/// #[rate_limit(rules = [(10, 60s)], by = ip)]
/// async fn create_post(Extension(decision): Extension<Decision>) -> String {
///     format!("created; {} more this minute", decision.remaining())
/// }
/// ```
///
/// # Compile errors
///
/// A mistake is one compile error on the token to fix, and the handler is
/// still generated (or, when it cannot be, the function kept as written) so
/// that routing it or calling `unlimited` causes no other error.
///
/// - The numbers, with limiter-model's message: a zero limit, window, rate,
///   capacity, burst or cost; a window or period over 366 days; more rules
///   than a policy holds; `prevent_duplicate` with another algorithm; a cost
///   no request could pay; a bucket or burst too large to compute exactly;
///   `count_when` or `count_failures` with a bucket or GCRA.
/// - The syntax: a missing or unknown unit; an unknown or repeated argument;
///   missing `rules`, `rules` given to a bucket or GCRA, or more than one
///   rule for the windows; an invalid or uppercase header name; an unknown
///   algorithm, `by` or failure policy.
/// - The function: not `async`, `unsafe`, generic, taking `self` or
///   `impl Trait`. In an `impl` block the compiler says that a struct "is
///   not supported in `trait`s or `impl`s": move the handler to a module.
/// - Its types, from the compiler: a return type that is not
///   `IntoResponse` (on the return type); a future that is not `Send`.
///
/// ```compile_fail
/// # use limiter_tower::rate_limit;
/// #[rate_limit(rules = [(10, 60sec)])]
/// //                         ^^^^^ unknown unit `sec` in `60sec`: expected ms, s, m, h or d
/// async fn create_post() {}
/// ```
#[proc_macro_attribute]
pub fn rate_limit(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match rate_limit_tokens(attr.into(), item.clone()) {
        Ok(expanded) => expanded.into(),
        Err(error) => recover(&error, item).into(),
    }
}

/// `#[rate_limit(attr)] item`: parse, check, expand, reporting every mistake
/// in the arguments and in the function at once.
fn rate_limit_tokens(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let args = syn::parse2::<parse::Args>(attr);
    let limit = match &args {
        Ok(args) => check::limit(args),
        Err(error) => Err(error.clone()),
    };
    match (limit, parse::Handler::parse(item)) {
        (Ok(limit), Ok(handler)) => Ok(expand::limited(&limit, &handler)),
        (Err(mut limit), Err(handler)) => {
            limit.combine(handler);
            Err(limit)
        }
        (Err(error), Ok(_)) | (Ok(_), Err(error)) => Err(error),
    }
}

/// `error`, and beside it what keeps it the only error: the handler without
/// a limit when the function can be one, the item as written otherwise.
fn recover(error: &syn::Error, item: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    let mut output = error.to_compile_error();
    match parse::Handler::parse_recovering(item.clone()) {
        Ok((handler, _)) => output.extend(expand::refused(&handler)),
        Err(_) => output.extend(item),
    }
    output
}

/// Emits the item, then the attribute's tokens beside it: what
/// `#[rate_limit]` generates besides the handler type, carried on that type
/// so that it is emitted only where the type can be.
#[doc(hidden)]
#[proc_macro_attribute]
pub fn __handler_items(items: TokenStream, item: TokenStream) -> TokenStream {
    let mut output = item;
    output.extend(items);
    output
}
