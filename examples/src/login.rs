//! Logging in: failed logins are limited per client address (on the
//! route) and per user (in the handler); a successful login never counts.

use std::sync::LazyLock;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use limiter_tower::{Control, Identity, KeySource, LimitLayer, Policy, Rule, rate_limit};
use serde::Deserialize;
use serde_json::json;

/// The password the example accepts, for any user.
pub const PASSWORD: &str = "let-me-in";

/// Failed logins per user: 5 in 15 minutes. Checked in the handler (the
/// user is in the body), on the key this limit's requests would use, so
/// that `GET /me/limits` shows it and an administrator's reset clears it.
pub static PER_USER: LazyLock<LimitLayer> = LazyLock::new(|| {
    let rule = Rule::new(5, Duration::from_secs(15 * 60)).expect("a valid rule");
    let policy = Policy::sliding_log([rule]).expect("a valid policy");
    LimitLayer::new("login-per-user", policy, KeySource::user())
});

/// What `POST /login` reads.
#[derive(Debug, Deserialize)]
pub struct Credentials {
    user: String,
    password: String,
}

/// Logs in: 200 for the password [`PASSWORD`], 401 otherwise. At most 5
/// failed logins per client address a minute (this route's limit, which
/// counts only failed responses) and 5 per user in 15 minutes ([`PER_USER`],
/// given back when the password is right); over either, every attempt,
/// even a correct one, gets 429.
#[rate_limit(rules = [(5, 60s)], by = ip, count_failures)]
pub(crate) async fn login(
    State(control): State<Control>,
    Json(credentials): Json<Credentials>,
) -> Response {
    let attempt = match control
        .attempt_on(&PER_USER, &Identity::user(&credentials.user))
        .await
    {
        Ok(attempt) => attempt,
        Err(error) => {
            let body = Json(json!({ "error": error.to_string() }));
            return (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
        }
    };
    if !attempt.decision().allowed() {
        // A blocked user is answered as the layers answer a block.
        return attempt.too_many_requests();
    }
    if credentials.password != PASSWORD {
        let body = Json(json!({ "error": "wrong user or password" }));
        return (StatusCode::UNAUTHORIZED, body).into_response();
    }
    // A success does not count against the user (the route's limit gives
    // it back to the address by its status).
    if let Err(error) = attempt.refund().await {
        tracing::warn!(%error, "a successful login stays counted");
    }
    Json(json!({ "user": credentials.user, "logged_in": true })).into_response()
}
