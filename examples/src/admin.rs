//! The admin interface's authentication: a bearer token set by the
//! operator (`LIMITER_ADMIN_TOKEN` in the `ugc` binary). Every admin
//! request carries `Authorization: Bearer <token>`; anything else is
//! answered 401 and reaches no admin handler. The peer address is never
//! consulted: behind a proxy on the same host every client's peer is the
//! proxy's loopback address.
//!
//! [`protect`] puts a router's routes behind the token; a server without a
//! token does not mount them at all (404).
//!
//! Guessing the token is throttled per client address, with limiter itself
//! ([`failed_authentications`]): after [`MAX_FAILURES`] (10) answers 401
//! within [`FAILURE_WINDOW`] (60 s) to one address, that address's admin
//! requests are answered the library's 429 (`Retry-After`, an RFC 9457
//! problem+json body) until the oldest failure leaves the window, the right
//! token included: the limit sits outside the token check, so a request
//! over it is answered before its token is looked at. Only 401s count: a
//! request with the right token is given back whatever it is answered
//! (200, 400 for a bad body, 507), and a path that is no admin route (404)
//! never reaches the limit. Other addresses are not affected. The address
//! is found as for `by = ip` (the server's trusted proxies and their one
//! header), and the count lives in the server's store, so instances sharing
//! a Redis share it.
//!
//! What follows from using the ordinary limit machinery: requests in
//! flight count until they are answered (at most 10 admin requests of one
//! address at once); while the store fails, the throttle is decided by the
//! local fallback, which gives nothing back, so every admin request of an
//! address counts then (10 a minute, the right token's too: an operator
//! repeating an unconfirmed change during an outage spreads the repeats
//! over a minute, or works from an address on the allow list); an address
//! on the allow list (`LIMITER_ALLOW`) is not throttled and shadow mode
//! (`LIMITER_SHADOW=1`) never denies. Blocks do not cover the admin routes
//! ([`LimitLayer::honours_blocks`]`(false)`): an operator who blocks the
//! address they work from, or the proxy every client comes through, can
//! still lift the block.

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use limiter_tower::{KeySource, LimitLayer, Policy, Rule};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The authentication scheme, matched without regard to case.
const SCHEME: &[u8] = b"bearer";

/// The secret an admin request must present. Only its SHA-256 digest is
/// kept, and `Debug` prints neither.
///
/// A presented token is hashed and the two digests compared in constant
/// time: how long the comparison takes says nothing about how much of the
/// token, or of its length, was right.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl AdminToken {
    /// The token `token`: 1 or more visible ASCII characters (`!` to `~`,
    /// no space), since it travels in an `Authorization` header. An empty
    /// token, or one with other characters, is an error saying why.
    pub fn new(token: &str) -> Result<Self, String> {
        if token.is_empty() {
            return Err(
                "the admin token is empty: set a secret token to mount the admin \
                        routes, or leave the variable unset to keep them off"
                    .into(),
            );
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the admin token must be visible ASCII characters without spaces \
                        (it is sent as `Authorization: Bearer <token>`)"
                    .into(),
            );
        }
        Ok(Self {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// Whether `headers` hold exactly one `Authorization: Bearer <token>`
    /// with this token. The scheme is matched without regard to case
    /// (`bearer`, `BEARER`); one or more spaces separate it from the token,
    /// which must match exactly (case included). A missing, repeated or
    /// non-ASCII header, another scheme, or an empty token is refused.
    pub fn authorizes(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(Refusal::Missing);
        };
        let presented = bearer_token(value).ok_or(Refusal::Invalid)?;
        let digest: [u8; 32] = Sha256::digest(presented).into();
        if bool::from(digest[..].ct_eq(&self.digest[..])) {
            Ok(())
        } else {
            Err(Refusal::Invalid)
        }
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// The token of `Bearer <token>`, or `None` for another scheme, no token,
/// or bytes that are not visible ASCII.
fn bearer_token(value: &HeaderValue) -> Option<&[u8]> {
    let value = value.as_bytes();
    let scheme = value.get(..SCHEME.len())?;
    if !scheme.eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    let rest = &value[SCHEME.len()..];
    let token = rest.trim_ascii_start();
    // At least one space after the scheme, and spaces only.
    if token.len() == rest.len() || rest[..rest.len() - token.len()].iter().any(|&b| b != b' ') {
        return None;
    }
    (!token.is_empty() && token.iter().all(u8::is_ascii_graphic)).then_some(token)
}

/// Why an admin request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization` header, or more than one.
    Missing,
    /// Not `Bearer <token>`, or not the token.
    Invalid,
}

impl IntoResponse for Refusal {
    /// 401 with `WWW-Authenticate: Bearer ...` and a small JSON error.
    fn into_response(self) -> Response {
        let (challenge, error) = match self {
            Self::Missing => (
                r#"Bearer realm="admin""#,
                "admin routes need the header Authorization: Bearer <token>",
            ),
            Self::Invalid => (
                r#"Bearer realm="admin", error="invalid_token""#,
                "the admin token is not valid",
            ),
        };
        (
            StatusCode::UNAUTHORIZED,
            [(WWW_AUTHENTICATE, HeaderValue::from_static(challenge))],
            Json(json!({ "error": error })),
        )
            .into_response()
    }
}

/// The middleware: passes a request that [`AdminToken::authorizes`] to the
/// route, answers any other 401.
pub async fn require_token(
    State(token): State<AdminToken>,
    request: Request,
    next: Next,
) -> Response {
    match token.authorizes(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// How many failed authentications (401) one client address may have
/// within [`FAILURE_WINDOW`] before its admin requests are answered 429.
pub const MAX_FAILURES: u64 = 10;

/// The window over which [`MAX_FAILURES`] are counted.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// The name of [`failed_authentications`]' limit: its keys are
/// `{prefix}:{address}:admin-auth-failures`.
pub const FAILURES_LIMIT_NAME: &str = "admin-auth-failures";

/// The limit on guessing the token: at most [`MAX_FAILURES`] answers 401
/// per client address within [`FAILURE_WINDOW`] (a sliding log), counting
/// only 401s. It takes its store and the client's address from the
/// server's `LimiterLayer`, as every other limit of the server does.
pub fn failed_authentications() -> LimitLayer {
    let rule = Rule::new(MAX_FAILURES, FAILURE_WINDOW).expect("a valid rule");
    let policy = Policy::sliding_log([rule]).expect("a valid policy");
    LimitLayer::new(FAILURES_LIMIT_NAME, policy, KeySource::ip())
        // A block of the operator's own address (or of the proxy's) must
        // not lock them out of lifting it.
        .honours_blocks(false)
        .count_when(|status, _headers| status == StatusCode::UNAUTHORIZED)
        .expect("a sliding log gives requests back")
}

/// `routes` behind `token`: each of their requests needs it (401
/// otherwise), while paths that match none of them still answer 404. An
/// address with [`MAX_FAILURES`] 401s in the last [`FAILURE_WINDOW`] is
/// answered 429 before its token is checked ([`failed_authentications`]).
/// The router must be served below a `LimiterLayer`, which holds the
/// store the failures are counted in.
pub fn protect(routes: Router, token: AdminToken) -> Router {
    routes
        .route_layer(from_fn_with_state(token, require_token))
        // A change whose throttle check the store did not answer is refused
        // at once (503, nothing changed), not sent to wait out a second
        // deadline.
        .route_layer(from_fn(limiter_tower::changes_need_the_store))
        // Added last, so outermost: over the limit, the token is not read.
        .route_layer(failed_authentications())
}
