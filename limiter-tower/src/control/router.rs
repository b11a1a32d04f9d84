//! The admin router: the [`Control`]'s handles over HTTP, as JSON.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use limiter_core::{Error, Identity};
use percent_encoding::percent_decode_str;

use super::Control;
use crate::response::{Protocol, problem};

/// The header whose value the kind `key` names, unless
/// [`Control::api_key_header`] says another.
pub const DEFAULT_API_KEY_HEADER: &str = "x-api-key";

pub(super) fn router<S>(control: &Control) -> Router<S> {
    Router::new()
        .route("/limits", get(list_limits))
        .route("/limits/{kind}/{identity}", get(limits).delete(reset))
        .route("/blocks", get(list_blocks))
        .route(
            "/blocks/{kind}/{identity}",
            get(blocked).put(block).delete(unblock),
        )
        .route("/overrides", get(list_overrides))
        .route(
            "/overrides/{limit}",
            get(get_override).put(put_override).delete(delete_override),
        )
        .route("/top/{limit}", get(top_denied))
        .route_layer(axum::middleware::from_fn(super::changes_need_the_store))
        .with_state(control.clone())
}

/// Why a path names no identity.
enum NoIdentity {
    UnknownKind,
    NotAnAddress,
}

impl IntoResponse for NoIdentity {
    fn into_response(self) -> Response {
        match self {
            Self::UnknownKind => StatusCode::NOT_FOUND.into_response(),
            Self::NotAnAddress => bad_request(
                "An `ip` identity is an address (203.0.113.7, 2001:db8::1) or a \
                 network (2001:db8:1:2::/64, its `/` encoded as %2F).",
            ),
        }
    }
}

/// An address, or a network `address/prefix`.
fn address(bytes: &[u8]) -> Option<Identity> {
    let text = std::str::from_utf8(bytes).ok()?;
    match text.split_once('/') {
        None => Some(Identity::ip(text.parse().ok()?)),
        Some((ip, prefix)) => {
            let ip: std::net::IpAddr = ip.parse().ok()?;
            let prefix: u8 = prefix.parse().ok()?;
            let bits = if ip.is_ipv4() { 32 } else { 128 };
            (prefix <= bits).then(|| Identity::network(ip, prefix))
        }
    }
}

async fn list_limits(State(control): State<Control>) -> Response {
    json(&control.limit_list())
}

async fn limits(State(control): State<Control>, uri: Uri) -> Response {
    let identity = match identity_of(&control, &uri) {
        Ok(identity) => identity,
        Err(no_identity) => return no_identity.into_response(),
    };
    match control.limits(&identity).await {
        Ok(states) => json(&states),
        Err(error) => failed(&error),
    }
}

async fn reset(State(control): State<Control>, uri: Uri) -> Response {
    let identity = match identity_of(&control, &uri) {
        Ok(identity) => identity,
        Err(no_identity) => return no_identity.into_response(),
    };
    match control.reset(&identity).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

/// The query of `GET /blocks`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BlocksPage {
    after: Option<String>,
    limit: Option<usize>,
}

/// A page of blocks as the router lists them.
#[derive(serde::Serialize)]
struct ListedBlockBody {
    key: String,
    seconds: u64,
    origin: &'static str,
}

async fn list_blocks(State(control): State<Control>, uri: Uri) -> Response {
    let query = uri.query().unwrap_or("");
    let Ok(page) = serde_urlencoded::from_str::<BlocksPage>(query) else {
        return bad_request("The query is `after={key}&limit={n}`, both optional.");
    };
    let limit = page.limit.unwrap_or(100);
    if !(1..=limiter_core::MAX_BLOCKS_PAGE).contains(&limit) {
        return bad_request(&format!(
            "`limit` is 1 to {}.",
            limiter_core::MAX_BLOCKS_PAGE
        ));
    }
    match control.blocks(page.after.as_deref(), limit) {
        Ok(blocks) => {
            let next = (blocks.len() == limit)
                .then(|| blocks.last().map(|b| b.key.clone()))
                .flatten();
            let blocks: Vec<ListedBlockBody> = blocks
                .into_iter()
                .map(|b| ListedBlockBody {
                    seconds: b.left.as_micros().div_ceil(1_000_000) as u64,
                    origin: b.origin.name(),
                    key: b.key,
                })
                .collect();
            json(&serde_json::json!({ "blocks": blocks, "next": next }))
        }
        Err(error) => failed(&error),
    }
}

/// The query of `GET /top/{limit}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TopQuery {
    n: Option<usize>,
}

/// The most offenders `GET /top/{limit}` lists.
const MAX_TOP: usize = 100;

/// The header naming the instance that answered `GET /top/{limit}`.
const INSTANCE_HEADER: &str = "limiter-instance";

async fn top_denied(State(control): State<Control>, uri: Uri) -> Response {
    let n = match serde_urlencoded::from_str::<TopQuery>(uri.query().unwrap_or("")) {
        Ok(TopQuery { n: None }) => 10,
        Ok(TopQuery { n: Some(n) }) if (1..=MAX_TOP).contains(&n) => n,
        _ => return bad_request(&format!("The query is `n={{n}}`, n from 1 to {MAX_TOP}.")),
    };
    // The name as keys end with it, raw: escaped as an identity is; or
    // percent-decoded, for a client that encoded it.
    let raw = uri.path().rsplit('/').next().unwrap_or("");
    let found = match control.top_denied(raw, n).await {
        Err(unknown) => match percent_decode_str(raw).decode_utf8() {
            Ok(decoded) => control.top_denied(&decoded, n).await,
            Err(_) => Err(unknown),
        },
        found => found,
    };
    let offenders = match found {
        Ok(offenders) => offenders,
        Err(unknown) => {
            return problem(
                Protocol::Http,
                StatusCode::NOT_FOUND,
                &format!("No limit here is named {:?}.", unknown.0),
            );
        }
    };
    let mut response = json(&offenders);
    if let Ok(instance) = HeaderValue::from_str(control.instance()) {
        response.headers_mut().insert(INSTANCE_HEADER, instance);
    }
    response
}

/// The longest block the router sets: a year.
const MAX_BLOCK_SECONDS: u64 = 365 * 24 * 3600;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockBody {
    seconds: u64,
}

async fn blocked(State(control): State<Control>, uri: Uri) -> Response {
    let identity = match identity_of(&control, &uri) {
        Ok(identity) => identity,
        Err(no_identity) => return no_identity.into_response(),
    };
    match control.blocked(&identity) {
        Some(left) => {
            let seconds = left.as_micros().div_ceil(1_000_000) as u64;
            json(&serde_json::json!({ "seconds": seconds }))
        }
        None => problem(
            Protocol::Http,
            StatusCode::NOT_FOUND,
            "This identity is not blocked.",
        ),
    }
}

async fn block(State(control): State<Control>, uri: Uri, body: axum::body::Bytes) -> Response {
    let identity = match identity_of(&control, &uri) {
        Ok(identity) => identity,
        Err(no_identity) => return no_identity.into_response(),
    };
    let seconds = match serde_json::from_slice::<BlockBody>(&body) {
        Ok(BlockBody { seconds }) if (1..=MAX_BLOCK_SECONDS).contains(&seconds) => seconds,
        _ => {
            return bad_request(&format!(
                "The body must be {{\"seconds\": N}}, N from 1 to {MAX_BLOCK_SECONDS}."
            ));
        }
    };
    let duration = std::time::Duration::from_secs(seconds);
    match control.block(&identity, duration).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

async fn unblock(State(control): State<Control>, uri: Uri) -> Response {
    let identity = match identity_of(&control, &uri) {
        Ok(identity) => identity,
        Err(no_identity) => return no_identity.into_response(),
    };
    match control.unblock(&identity).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

fn json(value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    ([(CONTENT_TYPE, "application/json")], body).into_response()
}

fn bad_request(detail: &str) -> Response {
    problem(Protocol::Http, StatusCode::BAD_REQUEST, detail)
}

/// The body of `PUT /overrides/{limit}`: the rules as the attribute
/// writes them, the mode and how long it holds.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideBody {
    #[serde(flatten)]
    rules: super::WrittenRules,
    #[serde(default)]
    mode: Option<String>,
    seconds: u64,
}

/// The 404 of a path `/overrides/{limit}` naming no limit of `control`.
fn unknown_limit(control: &Control, limit: &str) -> Option<Response> {
    if control.limit_names().iter().any(|name| name == limit) {
        return None;
    }
    Some(problem(
        Protocol::Http,
        StatusCode::NOT_FOUND,
        &format!(
            "No limit is named {limit:?} here (its name as its keys end, as `/me/limits` shows it)."
        ),
    ))
}

async fn list_overrides(State(control): State<Control>) -> Response {
    json(&control.overrides())
}

async fn get_override(State(control): State<Control>, Path(limit): Path<String>) -> Response {
    if let Some(not_found) = unknown_limit(&control, &limit) {
        return not_found;
    }
    match control.overrides().into_iter().find(|o| o.limit == limit) {
        Some(state) => json(&state),
        None => problem(
            Protocol::Http,
            StatusCode::NOT_FOUND,
            "No override holds on this limit: its compiled rules do.",
        ),
    }
}

async fn put_override(
    State(control): State<Control>,
    Path(limit): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    if let Some(not_found) = unknown_limit(&control, &limit) {
        return not_found;
    }
    let body = match serde_json::from_slice::<OverrideBody>(&body) {
        Ok(body) => body,
        Err(error) => {
            return bad_request(&format!(
                "The body is {{\"rules\": [[2, \"60s\"]], \"seconds\": 3600}}, or \
                 {{\"rate\": [10, \"1s\"], \"burst\": 20, \"seconds\": 3600}}, with an optional \
                 \"mode\" (enforce, shadow, off): {error}."
            ));
        }
    };
    let mode = match body
        .mode
        .as_deref()
        .map(limiter_core::OverrideMode::from_name)
    {
        None => Ok(limiter_core::OverrideMode::Enforce),
        Some(mode) => mode,
    };
    let duration = std::time::Duration::from_secs(body.seconds);
    let set = match mode {
        Ok(mode) => {
            control
                .set_written_override(&limit, &body.rules, mode, duration)
                .await
        }
        Err(error) => Err(error.into()),
    };
    match set {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

async fn delete_override(State(control): State<Control>, Path(limit): Path<String>) -> Response {
    if let Some(not_found) = unknown_limit(&control, &limit) {
        return not_found;
    }
    match control.clear_override(&limit).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

fn failed(error: &Error) -> Response {
    if let Error::Config(refused) = error {
        // What the attribute's compiler would have said.
        return bad_request(&format!("{refused}."));
    }
    let status = match error {
        Error::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
        // The store keeps no more of them (an operator's blocks): the
        // store is well, the request cannot be stored.
        Error::Full(_) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    tracing::warn!(%error, "a limit control call failed");
    let detail = match error {
        Error::Unsupported(_) => format!("The store cannot do this: {error}."),
        // The store's own words: the change may have been made, and holds
        // everywhere or nowhere once the store answers; repeat it.
        Error::Unconfirmed(_) => format!("The change was not confirmed: {error}."),
        Error::Full(_) => format!("The store holds no more: {error}."),
        _ => format!("The limits could not be read or changed: {error}."),
    };
    problem(Protocol::Http, status, &detail)
}

/// The identity a router path names, `/{kind}/{identity}` at its end,
/// read from the raw path: the identity is percent-decoded once, to
/// bytes (axum's path extractors decode to UTF-8 text, which a raw
/// header value need not be).
fn identity_of(control: &Control, uri: &Uri) -> Result<Identity, NoIdentity> {
    let mut segments = uri.path().rsplit('/');
    let (Some(raw), Some(kind)) = (segments.next(), segments.next()) else {
        return Err(NoIdentity::UnknownKind);
    };
    let bytes: Vec<u8> = percent_decode_str(raw).collect();
    match kind {
        "user" => Ok(Identity::user(&bytes)),
        "key" => Ok(Identity::header(&control.api_key_header, &bytes)),
        "custom" => Ok(Identity::custom(&bytes)),
        "ip" => address(&bytes).ok_or(NoIdentity::NotAnAddress),
        _ => Err(NoIdentity::UnknownKind),
    }
}
