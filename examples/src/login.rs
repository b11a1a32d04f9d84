//! Logging in: failed logins are limited per client address (on the
//! route) and per user (in the handler); a successful login never counts.
//!
//! The per-user limit counts the user name a person means, not the bytes
//! sent: `alice`, `Alice`, ` alice` and `ａｌｉｃｅ` (full width) are one
//! user, and so are `josé` written precomposed and with a combining accent
//! ([`normalise_user`]). The library itself compares identities as raw
//! bytes; deciding which spellings are one person is the application's.

use std::sync::LazyLock;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use icu_casemap::CaseMapper;
use icu_normalizer::ComposingNormalizer;
use limiter_tower::{
    AttemptResponse, Control, Identity, KeySource, LimitLayer, Policy, Rule, rate_limit,
};
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

/// The user name `name` as the per-user limit counts it: Unicode NFKC,
/// full Unicode case folding (ICU4X's `icu_casemap`, not
/// `str::to_lowercase`: `Straße` and `STRASSE` fold alike), NFKC again
/// (folding can undo it), then trimmed of Unicode white space.
///
/// NFKC makes compatibility forms one (full-width `ａｌｉｃｅ` is
/// `alice`, a ligature `ﬁ` is `fi`) and composes accents (`josé` with a
/// combining acute is the precomposed `josé`); folding makes case one;
/// trimming after NFKC also removes an ideographic space (U+3000). A name
/// that is only white space becomes empty.
///
/// ```
/// use limiter_examples::login::normalise_user;
///
/// assert_eq!(normalise_user(" Ａlice "), "alice");
/// assert_eq!(normalise_user("Jose\u{301}"), "jos\u{e9}");
/// ```
pub fn normalise_user(name: &str) -> String {
    let nfkc = ComposingNormalizer::new_nfkc();
    let folded = CaseMapper::new()
        .fold_string(&nfkc.normalize(name))
        .into_owned();
    nfkc.normalize(&folded).trim().to_owned()
}

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
    let user = Identity::user(normalise_user(&credentials.user));
    let attempt = match control.attempt_on(&PER_USER, &user).await {
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

#[cfg(test)]
mod tests {
    use super::normalise_user;

    #[test]
    fn four_spellings_of_alice_are_one_user() {
        let full_width = "\u{ff41}\u{ff4c}\u{ff49}\u{ff43}\u{ff45}";
        for spelling in ["alice", "Alice", " alice", full_width] {
            assert_eq!(normalise_user(spelling), "alice", "{spelling:?}");
        }
    }

    #[test]
    fn jose_precomposed_and_decomposed_are_one_user_in_nfc() {
        let nfc = "jos\u{e9}";
        let nfd = "jose\u{301}";
        assert_ne!(nfc, nfd);
        assert_eq!(normalise_user(nfc), nfc);
        assert_eq!(normalise_user(nfd), nfc);
        assert_eq!(normalise_user("JOSE\u{301}"), nfc);
    }

    #[test]
    fn full_case_folding_and_white_space_only() {
        assert_eq!(normalise_user("Stra\u{df}e"), normalise_user("STRASSE"));
        assert_eq!(normalise_user("\u{fb01}x"), "fix");
        assert_eq!(normalise_user("ALICE\u{3000}"), "alice");
        assert_eq!(normalise_user(" \t\u{3000} "), "");
    }
}
