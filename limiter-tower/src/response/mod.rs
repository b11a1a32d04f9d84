//! The answers the limiter gives instead of the service's: 429 over the
//! limit, 503 when the store cannot decide, the missing-identity status,
//! and 500 when the server is misconfigured. HTTP requests get RFC 9457
//! `application/problem+json` bodies (or a route's message); gRPC calls get
//! trailers-only responses with a gRPC status (see [`grpc`]).

mod fields;
mod grpc;

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode};
use limiter_core::Decision;

pub(crate) use fields::{HeaderOptions, RateLimitHeaders, RouteFields, seconds};
pub use fields::{RATELIMIT, RATELIMIT_POLICY};

/// The problem type of a 429 (RFC 9457), from the RateLimit draft.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// How a request is answered: read from its head only when the limiter
/// answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http,
    Grpc,
}

impl Protocol {
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        if grpc::is_grpc(headers) {
            Self::Grpc
        } else {
            Self::Http
        }
    }
}

/// Over the limit: 429 with `Retry-After` (whole seconds, rounded up, at
/// least 1), the RateLimit fields, and the route's message or a
/// problem+json body naming the violated rules; for gRPC,
/// `RESOURCE_EXHAUSTED` with the retry information and the fields.
pub(crate) fn too_many_requests_of(
    protocol: Protocol,
    decision: &Decision,
    names: &[String],
    cost: u64,
    fields: RateLimitHeaders,
    message: Option<&str>,
) -> Response {
    let retry_after = decision.retry_after().unwrap_or_default();
    let retry_seconds = seconds(retry_after).max(1);
    let violated: Vec<String> = names
        .iter()
        .zip(decision.rules())
        .filter(|(_, status)| status.remaining() < cost)
        .map(|(name, _)| name.clone())
        .collect();
    let detail = || {
        format!(
            "Rate limit exceeded ({}); retry after {retry_seconds} s.",
            violated.join(", ")
        )
    };
    let mut response = match protocol {
        Protocol::Grpc => grpc::trailers_only(
            grpc::Code::ResourceExhausted,
            &message.map_or_else(detail, str::to_owned),
            Some(retry_after),
            &violated,
        ),
        Protocol::Http => {
            let mut response = match message {
                Some(message) => text(StatusCode::TOO_MANY_REQUESTS, message),
                None => problem_json(
                    StatusCode::TOO_MANY_REQUESTS,
                    &Problem {
                        kind: QUOTA_EXCEEDED,
                        title: "Too Many Requests",
                        status: 429,
                        detail: &detail(),
                        violated_policies: Some(&violated),
                    },
                ),
            };
            response
                .headers_mut()
                .insert(RETRY_AFTER, retry_seconds.into());
            response
        }
    };
    fields.add_to(response.headers_mut());
    response
}

/// A refusal without a decision (the missing-identity status, or 500): an
/// RFC 9457 problem of type `about:blank`, or the matching gRPC status.
pub(crate) fn problem(protocol: Protocol, status: StatusCode, detail: &str) -> Response {
    match protocol {
        Protocol::Grpc => grpc::trailers_only(grpc::Code::of(status), detail, None, &[]),
        Protocol::Http => problem_json(
            status,
            &Problem {
                kind: "about:blank",
                title: status.canonical_reason().unwrap_or("Error"),
                status: status.as_u16(),
                detail,
                violated_policies: None,
            },
        ),
    }
}

/// The response the layers give a request `decision` denied under
/// `policy`, for a decision of the programmatic API: `429 Too Many
/// Requests` with `Retry-After`, the `RateLimit-Policy` and `RateLimit`
/// fields, and a problem+json body naming the violated rules (for a
/// request of the policy's cost).
///
/// ```
/// use std::time::Duration;
/// use limiter_tower::{Limiter, MemoryStore, Policy, Rule, too_many_requests};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let limiter = Limiter::new(MemoryStore::new());
/// let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60))?])?;
/// limiter.check("bob:login", &policy).await?;
/// let decision = limiter.check("bob:login", &policy).await?;
/// let response = too_many_requests(&decision, &policy);
/// assert_eq!(response.status(), 429);
/// assert_eq!(response.headers()["retry-after"], "60");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub fn too_many_requests(decision: &Decision, policy: &limiter_core::Policy) -> Response {
    let names = policy.names();
    let options = HeaderOptions {
        on_allowed: true,
        legacy: false,
    };
    let fields = RouteFields::named(policy, &names).of(decision, options);
    self::too_many_requests_of(
        Protocol::Http,
        decision,
        &names,
        policy.cost(),
        fields,
        None,
    )
}

/// The problem type of a 429 answered because the identity is blocked
/// (by an administrator or a penalty), not because a rate was exceeded.
pub const BLOCKED: &str = "urn:limiter:problem:blocked";

/// A blocked identity: 429 with `Retry-After` (the block's remaining time,
/// whole seconds rounded up) and a problem of type [`BLOCKED`]; for gRPC,
/// `RESOURCE_EXHAUSTED` with the retry information.
pub(crate) fn blocked(protocol: Protocol, left: Duration) -> Response {
    let retry_seconds = seconds(left).max(1);
    let detail = format!("This client is blocked; retry after {retry_seconds} s.");
    match protocol {
        Protocol::Grpc => {
            grpc::trailers_only(grpc::Code::ResourceExhausted, &detail, Some(left), &[])
        }
        Protocol::Http => {
            let mut response = problem_json(
                StatusCode::TOO_MANY_REQUESTS,
                &Problem {
                    kind: BLOCKED,
                    title: "Blocked",
                    status: 429,
                    detail: &detail,
                    violated_policies: None,
                },
            );
            response
                .headers_mut()
                .insert(RETRY_AFTER, retry_seconds.into());
            response
        }
    }
}

/// The problem type of a 403 answered because the client or identity is
/// on a deny list.
pub const DENIED: &str = "urn:limiter:problem:denied";

/// A client or identity on a deny list: 403 with a problem of type
/// [`DENIED`]; for gRPC, `PERMISSION_DENIED`.
pub(crate) fn deny_listed(protocol: Protocol) -> Response {
    const DETAIL: &str = "This client may not use this service.";
    match protocol {
        Protocol::Grpc => {
            grpc::trailers_only(grpc::Code::of(StatusCode::FORBIDDEN), DETAIL, None, &[])
        }
        Protocol::Http => problem_json(
            StatusCode::FORBIDDEN,
            &Problem {
                kind: DENIED,
                title: "Forbidden",
                status: 403,
                detail: DETAIL,
                violated_policies: None,
            },
        ),
    }
}

/// The store could not decide: 503 with `Retry-After`, or gRPC `UNAVAILABLE`
/// with the retry information.
pub(crate) fn unavailable(protocol: Protocol, retry_after: Duration) -> Response {
    const DETAIL: &str = "The rate limiter cannot decide right now; retry shortly.";
    match protocol {
        Protocol::Grpc => {
            grpc::trailers_only(grpc::Code::Unavailable, DETAIL, Some(retry_after), &[])
        }
        Protocol::Http => {
            let mut response = problem(protocol, StatusCode::SERVICE_UNAVAILABLE, DETAIL);
            response
                .headers_mut()
                .insert(RETRY_AFTER, seconds(retry_after).max(1).into());
            response
        }
    }
}

/// An RFC 9457 problem details object, with the RateLimit draft's
/// `violated-policies` member for a 429.
#[derive(serde::Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    title: &'a str,
    status: u16,
    detail: &'a str,
    #[serde(rename = "violated-policies", skip_serializing_if = "Option::is_none")]
    violated_policies: Option<&'a [String]>,
}

/// Marks a response the limiter made itself (a 429, a block, a refusal,
/// a 503 of its own): a limit above it that counts by outcome gives the
/// request back, since the handler decided no outcome.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refusal;

/// Marks `response` as the limiter's own ([`Refusal`]).
pub(crate) fn mark_refusal(response: &mut Response) {
    response.extensions_mut().insert(Refusal);
}

fn problem_json(status: StatusCode, body: &Problem<'_>) -> Response {
    let body = serde_json::to_vec(body).expect("strings and numbers serialize");
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    mark_refusal(&mut response);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

fn text(status: StatusCode, body: &str) -> Response {
    let mut response = Response::new(Body::from(body.to_owned()));
    *response.status_mut() = status;
    mark_refusal(&mut response);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_bodies_are_json_whatever_the_text() {
        let response = problem(
            Protocol::Http,
            StatusCode::UNAUTHORIZED,
            "a \"quoted\"\\ line\n\u{1}",
        );
        let body = futures_util::FutureExt::now_or_never(axum::body::to_bytes(
            response.into_body(),
            usize::MAX,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            &body[..],
            br#"{"type":"about:blank","title":"Unauthorized","status":401,"detail":"a \"quoted\"\\ line\n\u0001"}"#
        );
    }

    #[test]
    fn grpc_calls_are_told_by_content_type() {
        let of = |content_type: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            Protocol::of(&headers)
        };
        assert_eq!(of("application/grpc"), Protocol::Grpc);
        assert_eq!(of("application/grpc+proto"), Protocol::Grpc);
        assert_eq!(of("application/json"), Protocol::Http);
        assert_eq!(Protocol::of(&HeaderMap::new()), Protocol::Http);
    }

    #[test]
    fn refusals_keep_their_meaning_in_grpc() {
        let code = |status| {
            let response = problem(Protocol::Grpc, status, "no");
            assert_eq!(response.status(), StatusCode::OK);
            response.headers()["grpc-status"]
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(code(StatusCode::UNAUTHORIZED), "16");
        assert_eq!(code(StatusCode::FORBIDDEN), "7");
        assert_eq!(code(StatusCode::BAD_REQUEST), "3");
        assert_eq!(code(StatusCode::INTERNAL_SERVER_ERROR), "13");
        let unavailable = unavailable(Protocol::Grpc, Duration::from_secs(1));
        assert_eq!(unavailable.headers()["grpc-status"], "14");
        assert_eq!(unavailable.headers()["grpc-retry-pushback-ms"], "1000");
    }
}
