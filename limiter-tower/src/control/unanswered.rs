//! Changes refused at once when the store just failed the request's own
//! rate-limit check.

use axum::extract::Request;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use limiter_core::{Decider, Decision};

use crate::response::{Protocol, problem};

/// Middleware (`axum::middleware::from_fn`) for routes that change state
/// through the store, such as [`Control::router`](super::Control::router)'s,
/// which has it: a request other than `GET`, `HEAD` or `OPTIONS` whose
/// rate-limit check above was decided without the store (its
/// [`Decision`] extension says [`Decider::Fallback`] or
/// [`Decider::FailedOpen`]: the store did not answer it) is answered 503
/// at once, with `Retry-After: 1`, and changes nothing.
///
/// The store failed a moment ago on this very request: a change sent now
/// would most likely wait out a second deadline, and answer "not confirmed"
/// after twice the time. Refused instead, it is answered within the one
/// deadline its check took, and it is in effect nowhere: repeat it once
/// the store answers. A request whose limits did not check it (an allowed
/// client, a shadow limit's bypass) is let through.
///
/// ```
/// use axum::{Router, middleware, routing::put};
///
/// let plans: Router = Router::new()
///     .route("/plans/{key}", put(|| async { "changed" }))
///     .route_layer(middleware::from_fn(limiter_tower::changes_need_the_store));
/// ```
pub async fn changes_need_the_store(request: Request, next: Next) -> Response {
    let reads = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let without_the_store = request
        .extensions()
        .get::<Decision>()
        .is_some_and(|decision| {
            matches!(decision.decider(), Decider::Fallback | Decider::FailedOpen)
        });
    if reads || !without_the_store {
        return next.run(request).await;
    }
    let mut refused = problem(
        Protocol::Http,
        StatusCode::SERVICE_UNAVAILABLE,
        "The rate-limit store did not answer this request's check: nothing was changed. \
         Repeat the change once the store answers.",
    );
    refused
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    refused
}
