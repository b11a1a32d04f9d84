//! The limiter's answers to gRPC requests: trailers-only responses.
//!
//! A gRPC client reads the outcome of a call from `grpc-status`, not from
//! the HTTP status, so a refused call is answered `200 OK` with no body and
//! the status in the header block (a trailers-only response):
//!
//! - `grpc-status`: `8` (`RESOURCE_EXHAUSTED`) over the limit; `14`
//!   (`UNAVAILABLE`) when the store cannot decide; `16`, `7` or `3` for a
//!   missing identity (after its HTTP status: 401, 403, 400); `13`
//!   (`INTERNAL`) when the server is misconfigured;
//! - `grpc-message`: the reason, percent-encoded as gRPC requires;
//! - with a retry time, both retry signals gRPC clients know:
//!   `grpc-retry-pushback-ms` (gRFC A6: a client whose retry policy covers
//!   the code waits that long before retrying), and `grpc-status-details-bin`,
//!   a `google.rpc.Status` whose details hold a `google.rpc.RetryInfo`
//!   (the exact retry delay) and, over the limit, a `google.rpc.QuotaFailure`
//!   naming each violated rule (the rich error model of Google APIs, read by
//!   tonic-types' `StatusExt`, for example).

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue, StatusCode};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

static GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
static GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
static GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");
static GRPC_STATUS_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// What `grpc-message` percent-encodes: bytes outside printable ASCII, and `%`.
const MESSAGE_ESCAPES: &AsciiSet = &CONTROLS.add(b'%');

/// The gRPC status codes the limiter answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    Unknown = 2,
    InvalidArgument = 3,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

impl Code {
    /// The code of a limiter answer that HTTP gives `status`.
    pub(crate) fn of(status: StatusCode) -> Self {
        match status {
            StatusCode::BAD_REQUEST => Self::InvalidArgument,
            StatusCode::UNAUTHORIZED => Self::Unauthenticated,
            StatusCode::FORBIDDEN => Self::PermissionDenied,
            StatusCode::TOO_MANY_REQUESTS => Self::ResourceExhausted,
            StatusCode::INTERNAL_SERVER_ERROR => Self::Internal,
            StatusCode::SERVICE_UNAVAILABLE => Self::Unavailable,
            _ => Self::Unknown,
        }
    }
}

/// Whether a request is a gRPC call: its content type is
/// `application/grpc`, possibly with a suffix such as `+proto`.
pub(crate) fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// A trailers-only response with `code` and `message`; `retry_after` adds
/// the retry signals, `violated` (the names of the rules over their limit)
/// a `QuotaFailure`.
pub(crate) fn trailers_only(
    code: Code,
    message: &str,
    retry_after: Option<Duration>,
    violated: &[String],
) -> Response {
    let mut response = Response::new(Body::empty());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(GRPC_STATUS.clone(), HeaderValue::from(code as u16));
    let encoded = utf8_percent_encode(message, MESSAGE_ESCAPES).to_string();
    headers.insert(
        GRPC_MESSAGE.clone(),
        HeaderValue::try_from(encoded).expect("percent-encoded text is visible ASCII"),
    );
    if let Some(retry_after) = retry_after {
        let millis = u64::try_from(retry_after.as_micros().div_ceil(1_000)).unwrap_or(u64::MAX);
        headers.insert(GRPC_RETRY_PUSHBACK_MS.clone(), millis.into());
        let details = status_details(code, message, retry_after, violated);
        headers.insert(
            GRPC_STATUS_DETAILS.clone(),
            HeaderValue::try_from(STANDARD_NO_PAD.encode(details))
                .expect("base64 is visible ASCII"),
        );
    }
    super::mark_refusal(&mut response);
    response
}

/// A `google.rpc.Status` (code, message, details) whose details are a
/// `google.rpc.RetryInfo` and, when rules were violated, a
/// `google.rpc.QuotaFailure`, in protobuf's wire format.
fn status_details(
    code: Code,
    message: &str,
    retry_after: Duration,
    violated: &[String],
) -> Vec<u8> {
    let mut duration = Vec::new();
    varint_field(&mut duration, 1, retry_after.as_secs());
    varint_field(&mut duration, 2, u64::from(retry_after.subsec_nanos()));
    let mut retry_info = Vec::new();
    bytes_field(&mut retry_info, 1, &duration);

    let mut status = Vec::new();
    varint_field(&mut status, 1, code as u64);
    bytes_field(&mut status, 2, message.as_bytes());
    bytes_field(
        &mut status,
        3,
        &any("type.googleapis.com/google.rpc.RetryInfo", &retry_info),
    );
    if !violated.is_empty() {
        let mut quota_failure = Vec::new();
        for rule in violated {
            let mut violation = Vec::new();
            bytes_field(&mut violation, 1, rule.as_bytes());
            bytes_field(&mut violation, 2, b"Rate limit exceeded");
            bytes_field(&mut quota_failure, 1, &violation);
        }
        bytes_field(
            &mut status,
            3,
            &any(
                "type.googleapis.com/google.rpc.QuotaFailure",
                &quota_failure,
            ),
        );
    }
    status
}

/// A `google.protobuf.Any` holding `value` of type `type_url`.
fn any(type_url: &str, value: &[u8]) -> Vec<u8> {
    let mut any = Vec::new();
    bytes_field(&mut any, 1, type_url.as_bytes());
    bytes_field(&mut any, 2, value);
    any
}

/// A varint field; proto3 leaves out zeros.
fn varint_field(out: &mut Vec<u8>, field: u64, value: u64) {
    if value != 0 {
        varint(out, field << 3);
        varint(out, value);
    }
}

/// A length-delimited field (strings, bytes, messages).
fn bytes_field(out: &mut Vec<u8>, field: u64, value: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        for (value, bytes) in [
            (0, &[0x00][..]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            varint(&mut out, value);
            assert_eq!(out, bytes, "{value}");
        }
    }

    #[test]
    fn a_refusal_is_a_trailers_only_response() {
        let response = trailers_only(
            Code::ResourceExhausted,
            "50% used: retry",
            Some(Duration::from_millis(1_500)),
            &["2-per-60s".into()],
        );
        assert_eq!(response.status(), StatusCode::OK);
        let header = |name: &str| response.headers()[name].to_str().unwrap();
        assert_eq!(header("content-type"), "application/grpc");
        assert_eq!(header("grpc-status"), "8");
        assert_eq!(header("grpc-message"), "50%25 used: retry");
        assert_eq!(header("grpc-retry-pushback-ms"), "1500");
        let details = STANDARD_NO_PAD
            .decode(header("grpc-status-details-bin"))
            .unwrap();
        assert_eq!(
            details,
            status_details(
                Code::ResourceExhausted,
                "50% used: retry",
                Duration::from_millis(1_500),
                &["2-per-60s".into()]
            )
        );
    }

    #[test]
    fn the_status_details_are_protobuf() {
        // Status { code: 8, message: "m", details: [Any { RetryInfo { 1.5 s } }] },
        // encoded by hand from the wire format.
        let details = status_details(
            Code::ResourceExhausted,
            "m",
            Duration::from_millis(1_500),
            &[],
        );
        let type_url = b"type.googleapis.com/google.rpc.RetryInfo";
        // Duration { seconds: 1, nanos: 500_000_000 }
        let duration = [0x08, 0x01, 0x10, 0x80, 0xca, 0xb5, 0xee, 0x01];
        let mut retry_info = vec![0x0a, duration.len() as u8];
        retry_info.extend_from_slice(&duration);
        let mut any = vec![0x0a, type_url.len() as u8];
        any.extend_from_slice(type_url);
        any.extend_from_slice(&[0x12, retry_info.len() as u8]);
        any.extend_from_slice(&retry_info);
        let mut expected = vec![0x08, 0x08, 0x12, 0x01, b'm', 0x1a, any.len() as u8];
        expected.extend_from_slice(&any);
        assert_eq!(details, expected);
    }
}
