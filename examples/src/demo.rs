//! Helpers the runnable examples share: build a request, send it through a
//! [`Router`] in process (no socket), print one line about the answer and
//! hand back the parts the examples assert on.
//!
//! ```no_run
//! # async fn run(app: axum::Router) {
//! use axum::http::{Method, StatusCode};
//! use limiter_examples::demo;
//!
//! let client = ([203, 0, 113, 7], 50_000).into();
//! let answer = demo::send(&app, demo::from_peer(Method::POST, "/login", client)).await;
//! assert_eq!(answer.status, StatusCode::OK);
//! # }
//! ```

use std::fmt::Write as _;
use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use limiter_tower::{RATELIMIT, RATELIMIT_POLICY};
use tower::ServiceExt as _;

/// The most of a response body [`send`] reads.
const BODY_LIMIT: usize = 64 * 1024;

/// The parts of a response the examples check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: StatusCode,
    /// The `RateLimit-Policy` header, empty when absent.
    pub policy: String,
    /// The `RateLimit` header, empty when absent.
    pub rate_limit: String,
    /// The `Retry-After` header, when present.
    pub retry_after: Option<String>,
    /// The body, as (lossy) UTF-8 text.
    pub body: String,
}

/// `{method} {path}` with an empty body, from no client in particular.
pub fn request(method: Method, path: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .expect("a valid request")
}

/// `{method} {path}` from `peer`: the `ConnectInfo` that `axum::serve` with
/// connect info would add, which `by = ip` counts by.
pub fn from_peer(method: Method, path: &str, peer: SocketAddr) -> Request<Body> {
    let mut request = request(method, path);
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// `request` with the header `name: value` added (an API key, a user id...).
pub fn with_header(mut request: Request<Body>, name: HeaderName, value: &str) -> Request<Body> {
    let value = HeaderValue::from_str(value).expect("a valid header value");
    request.headers_mut().append(name, value);
    request
}

/// Sends `request` through `app`, prints one line about it and its answer
/// (and, when it is refused, the body on the next), and returns the answer.
pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let line = describe(&request);
    let Ok(response) = app.clone().oneshot(request).await;
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .expect("a small body");
    let answer = Answer {
        status: parts.status,
        policy: header(&parts.headers, &RATELIMIT_POLICY).unwrap_or_default(),
        rate_limit: header(&parts.headers, &RATELIMIT).unwrap_or_default(),
        retry_after: header(&parts.headers, &RETRY_AFTER),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    println!("{line} -> {}", summary(&answer));
    answer
}

/// `  {method} {path}`, then `from {ip}` and each `{header}: {value}` it carries.
fn describe(request: &Request<Body>) -> String {
    let mut line = format!("  {} {}", request.method(), request.uri());
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        let _ = write!(line, " from {}", peer.ip());
    }
    for (name, value) in request.headers() {
        let _ = write!(line, " {name}: {}", value.to_str().unwrap_or("(not text)"));
    }
    line
}

/// The status, the rate limit headers present and, when refused, the body.
fn summary(answer: &Answer) -> String {
    let mut text = answer.status.to_string();
    if !answer.rate_limit.is_empty() {
        let _ = write!(text, " | RateLimit: {}", answer.rate_limit);
    }
    if let Some(retry_after) = &answer.retry_after {
        let _ = write!(text, " | Retry-After: {retry_after}");
    }
    if !answer.status.is_success() && !answer.body.is_empty() {
        let _ = write!(text, "\n    {}", answer.body);
    }
    text
}

/// The header `name` of `headers`, when it is present and text.
fn header(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
