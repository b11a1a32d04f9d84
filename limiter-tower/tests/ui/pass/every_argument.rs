//! Every argument form of `#[rate_limit]` on real axum handlers, lint-clean.
#![deny(warnings, missing_docs, unreachable_pub, missing_debug_implementations)]

use axum::Router;
use axum::routing::{get, post};

/// Keys computed by the application.
pub mod keys {
    use axum::http::request::Parts;

    /// The tenant named by the `x-tenant` header.
    pub fn tenant(parts: &Parts) -> Option<String> {
        parts
            .headers
            .get("x-tenant")?
            .to_str()
            .ok()
            .map(str::to_owned)
    }
}

/// The handlers, one per argument form.
pub mod handlers {
    use axum::Extension;
    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    use limiter_tower::{Decision, rate_limit};

    /// The application state.
    #[derive(Clone, Debug)]
    pub struct App {
        /// The site's name.
        pub name: &'static str,
    }

    /// Several rules per client IP, no duplicates within 5 s.
    #[rate_limit(rules = [(10, 60s), (20, 120s)], by = ip, prevent_duplicate)]
    pub async fn create_post(State(app): State<App>, body: String) -> String {
        format!("{}: {body}", app.name)
    }

    /// Every unit; `by` left out (the client IP).
    #[rate_limit(rules = [(1, 500ms), (10, 60s), (20, 2m), (100, 1h), (1000, 1d),])]
    pub async fn comment(Path(id): Path<u64>, body: String) -> String {
        format!("{id}: {body}")
    }

    /// Per user, a shorter duplicate window, a message and a key prefix.
    #[rate_limit(
        rules = [(5, 60s)],
        by = user,
        prevent_duplicate = 3s,
        message = "You are replying too fast.",
        key = "replies",
        algorithm = sliding_log,
        on_store_error = fallback(instances = 4),
    )]
    pub async fn reply(Path(id): Path<u64>) -> String {
        id.to_string()
    }

    /// One limit for everyone, in a fixed window.
    #[rate_limit(algorithm = fixed_window, rules = [(1000, 1m)], by = global, on_store_error = fail_open)]
    pub async fn health() -> &'static str {
        "ok"
    }

    /// Per API key, in a sliding window, each request costing 10.
    #[rate_limit(
        algorithm = sliding_window,
        rules = [(10_000, 1h)],
        by = header("x-api-key"),
        cost = 10
    )]
    pub async fn search(headers: HeaderMap) -> Result<String, StatusCode> {
        headers
            .get("x-query")
            .and_then(|q| q.to_str().ok())
            .map(str::to_owned)
            .ok_or(StatusCode::BAD_REQUEST)
    }

    /// A token bucket per user: 1 token a second, 10 at most, 2 per request.
    #[rate_limit(algorithm = token_bucket(rate = 1/s, burst = 10), by = user, cost = 2)]
    pub async fn like(Path(id): Path<u64>, State(_app): State<App>) -> StatusCode {
        let _ = id;
        StatusCode::CREATED
    }

    /// A leaky bucket per tenant.
    #[rate_limit(algorithm = leaky_bucket(capacity = 5, rate = 30/m), by = custom(crate::keys::tenant))]
    pub async fn upload(body: axum::body::Bytes) -> String {
        body.len().to_string()
    }

    /// GCRA per client IP: 100 per 60 s, 20 at once.
    #[rate_limit(algorithm = gcra(rate = 100/60s, burst = 20))]
    pub async fn feed() -> &'static str {
        "[]"
    }

    /// The default duplicate window (whose rule allows a cost of 1), the
    /// layer's local limiter when the store fails.
    #[rate_limit(rules = [(10, 1m), (100, 1d)], prevent_duplicate, cost = 1, on_store_error = fallback)]
    pub async fn comment_again(Path(id): Path<u64>) -> String {
        id.to_string()
    }

    /// Refused while the store is down; a leaky bucket in milliseconds.
    #[rate_limit(algorithm = leaky_bucket(rate = 1/500ms, capacity = 2), by = global, on_store_error = fail_closed)]
    pub async fn pay() -> StatusCode {
        StatusCode::ACCEPTED
    }

    /// A token bucket per day and a cost as large as the bucket.
    #[rate_limit(algorithm = token_bucket(rate = 86400/d, burst = 5), cost = 5, by = header("x-api-key"), message = "Quota spent.")]
    pub async fn report() {}

    /// The decision of the limit, read by the handler.
    #[rate_limit(rules = [(10, 60s)], by = user)]
    pub async fn quota(Extension(decision): Extension<Decision>) -> String {
        format!("{} of {}", decision.remaining(), decision.limit())
    }

    /// GCRA with a rate per hour.
    #[rate_limit(algorithm = gcra(rate = 3600/h, burst = 1), by = global, key = "exports")]
    pub async fn export(State(app): State<App>) -> &'static str {
        app.name
    }
}

fn main() {
    use handlers::*;

    let app: Router = Router::new()
        .route("/posts", post(create_post))
        .route("/posts/{id}/comments", post(comment))
        .route("/posts/{id}/replies", post(reply))
        .route("/posts/{id}/likes", post(like))
        .route("/health", get(health))
        .route("/search", get(search))
        .route("/upload", post(upload))
        .route("/feed", get(feed))
        .route("/export", get(export))
        .route("/posts/{id}/comments/again", post(comment_again))
        .route("/pay", post(pay))
        .route("/report", get(report))
        .route("/quota", get(quota))
        .with_state(App { name: "ugc" });
    let _ = app;
}
