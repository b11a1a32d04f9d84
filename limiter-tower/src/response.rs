//! The headers and bodies limiter answers with.
//!
//! `RateLimit-Policy` and `RateLimit` follow draft-ietf-httpapi-ratelimit-headers-10:
//! Structured Field lists with one item per rule, named after the rule. `t`
//! is the time until the rule makes more quota available
//! ([`RuleStatus::available_after`](limiter_core::RuleStatus::available_after)):
//! for a rule that denied the request, its retry time.
//!
//! ```text
//! RateLimit-Policy: "10-per-60s";q=10;w=60, "20-per-120s";q=20;w=120
//! RateLimit: "10-per-60s";r=0;t=12, "20-per-120s";r=7;t=95
//! ```

use std::fmt::Write;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use limiter_core::{Decision, Policy};

use crate::context::HeaderOptions;

/// `RateLimit-Policy`.
pub static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
static X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The problem type of a 429 (RFC 9457), from the RateLimit draft.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// Whole seconds, rounded up.
fn seconds(d: Duration) -> u64 {
    d.as_micros().div_ceil(1_000_000) as u64
}

/// The `RateLimit-Policy` value of a policy: fixed, so built once per route.
pub(crate) fn policy_header(policy: &Policy) -> HeaderValue {
    let mut value = String::with_capacity(64);
    for (i, (name, rule)) in policy.names().iter().zip(policy.rules()).enumerate() {
        if i > 0 {
            value.push_str(", ");
        }
        let window = seconds(rule.window()).max(1);
        let _ = write!(value, "\"{name}\";q={};w={window}", rule.limit());
    }
    HeaderValue::try_from(value).expect("rule names are visible ASCII")
}

/// The start of each rule's `RateLimit` item, `"10-per-60s";r=`: fixed per
/// route, so built once.
pub(crate) fn rate_limit_prefixes(policy: &Policy) -> Box<[Box<str>]> {
    policy
        .names()
        .iter()
        .map(|name| format!("\"{name}\";r=").into_boxed_str())
        .collect()
}

/// The `RateLimit` value of a decision, from the route's item prefixes.
fn rate_limit_header(prefixes: &[Box<str>], decision: &Decision) -> HeaderValue {
    /// Values up to this long are written on the stack, then copied once
    /// into the header (a `Vec` would be allocated, then reallocated to fit).
    const ON_STACK: usize = 256;
    // Per item: its prefix, `;t=`, `, ` and two numbers of at most 20 digits.
    let capacity = prefixes.iter().map(|p| p.len() + 45).sum();
    let value = if capacity <= ON_STACK {
        let mut buffer = [0; ON_STACK];
        let mut rest = &mut buffer[..];
        write_items(&mut rest, prefixes, decision);
        let written = ON_STACK - rest.len();
        HeaderValue::from_bytes(&buffer[..written])
    } else {
        let mut buffer = Vec::with_capacity(capacity);
        write_items(&mut buffer, prefixes, decision);
        HeaderValue::try_from(buffer)
    };
    value.expect("rule names are visible ASCII")
}

/// Writes the `RateLimit` items into `out`, which has room for them.
fn write_items(out: &mut impl std::io::Write, prefixes: &[Box<str>], decision: &Decision) {
    let mut put = |bytes: &[u8]| out.write_all(bytes).expect("sized for every item");
    let mut digits = [0; 20];
    for (i, (prefix, status)) in prefixes.iter().zip(decision.rules()).enumerate() {
        if i > 0 {
            put(b", ");
        }
        put(prefix.as_bytes());
        put(decimal(status.remaining(), &mut digits));
        put(b";t=");
        put(decimal(seconds(status.available_after()), &mut digits));
    }
}

/// `n` in decimal ASCII digits, written into `digits` without the formatting
/// machinery (this runs on every response).
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &digits[start..]
}

/// The rate-limit headers of one decision, ready to add to a response:
/// computed when the decision arrives, so the decision itself is not carried
/// along while the handler runs.
#[derive(Debug)]
pub(crate) struct RateLimitHeaders {
    policy: HeaderValue,
    state: HeaderValue,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`, when switched on.
    legacy: Option<Box<[HeaderValue; 3]>>,
}

impl RateLimitHeaders {
    pub(crate) fn new(
        policy: &HeaderValue,
        prefixes: &[Box<str>],
        decision: &Decision,
        options: HeaderOptions,
    ) -> Self {
        let legacy = options.legacy.then(|| {
            let deciding = decision.rules()[decision.rule_index()];
            Box::new([
                decision.limit().into(),
                deciding.remaining().into(),
                seconds(deciding.available_after()).into(),
            ])
        });
        Self {
            policy: policy.clone(),
            state: rate_limit_header(prefixes, decision),
            legacy,
        }
    }

    pub(crate) fn add_to(self, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY.clone(), self.policy);
        headers.insert(RATELIMIT.clone(), self.state);
        if let Some(legacy) = self.legacy {
            let [limit, remaining, reset] = *legacy;
            headers.insert(X_LIMIT.clone(), limit);
            headers.insert(X_REMAINING.clone(), remaining);
            headers.insert(X_RESET.clone(), reset);
        }
    }
}

/// The 429: `Retry-After` (whole seconds, rounded up, at least 1), the
/// RateLimit fields, and the handler's message or a problem+json body naming
/// the violated rules.
pub(crate) fn too_many_requests(
    decision: &Decision,
    policy: &Policy,
    headers: RateLimitHeaders,
    message: Option<&str>,
) -> Response {
    let retry_after = seconds(decision.retry_after().unwrap_or_default()).max(1);
    let violated: Vec<String> = policy
        .names()
        .into_iter()
        .zip(decision.rules())
        .filter(|(_, status)| status.remaining() < policy.cost())
        .map(|(name, _)| name)
        .collect();
    let mut response = match message {
        Some(message) => text(StatusCode::TOO_MANY_REQUESTS, message),
        None => {
            let detail = format!(
                "Rate limit exceeded ({}); retry after {retry_after} s.",
                violated.join(", ")
            );
            let body = Problem {
                kind: QUOTA_EXCEEDED,
                title: "Too Many Requests",
                status: 429,
                detail: &detail,
                violated_policies: Some(&violated),
            };
            problem_json(StatusCode::TOO_MANY_REQUESTS, &body)
        }
    };
    response
        .headers_mut()
        .insert(RETRY_AFTER, retry_after.into());
    headers.add_to(response.headers_mut());
    response
}

/// An RFC 9457 problem of type `about:blank`.
pub(crate) fn problem(status: StatusCode, detail: &str) -> Response {
    let body = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail,
        violated_policies: None,
    };
    problem_json(status, &body)
}

/// 503 with `Retry-After`: the store could not decide.
pub(crate) fn unavailable(detail: &str, retry_after: Duration) -> Response {
    let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, detail);
    response
        .headers_mut()
        .insert(RETRY_AFTER, seconds(retry_after).max(1).into());
    response
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

fn problem_json(status: StatusCode, body: &Problem<'_>) -> Response {
    let body = serde_json::to_vec(body).expect("strings and numbers serialize");
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

fn text(status: StatusCode, body: &str) -> Response {
    let mut response = Response::new(Body::from(body.to_owned()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use limiter_core::{MemoryStore, Rule};

    #[test]
    fn fields_name_each_rule() {
        let policy = Policy::sliding_log([
            Rule::new(10, Duration::from_secs(60)).unwrap(),
            Rule::new(20, Duration::from_secs(120)).unwrap(),
        ])
        .unwrap();
        assert_eq!(
            policy_header(&policy),
            "\"10-per-60s\";q=10;w=60, \"20-per-120s\";q=20;w=120"
        );
        let store = MemoryStore::new();
        let d = store.check_at("k", &policy, 3, 1_000_000).unwrap();
        assert_eq!(
            rate_limit_header(&rate_limit_prefixes(&policy), &d),
            "\"10-per-60s\";r=7;t=60, \"20-per-120s\";r=17;t=120"
        );
    }

    #[test]
    fn problem_bodies_are_json_whatever_the_text() {
        let response = problem(StatusCode::UNAUTHORIZED, "a \"quoted\"\\ line\n\u{1}");
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
    fn integers_are_written_in_decimal() {
        for n in [0, 7, 10, 255, 1_000_000, u64::MAX] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }
}
