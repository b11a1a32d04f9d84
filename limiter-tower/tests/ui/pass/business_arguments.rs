//! Every business argument: plans, allow lists, shadow mode, waiting, a
//! concurrency limit, costs from the request and penalties.
#![deny(warnings)]

use std::sync::LazyLock;
use std::time::Duration;

use axum::http::request::Parts;
use axum::{Router, routing::get, routing::post};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, Plan, Plans, Policy, Rule, rate_limit};

static PLANS: LazyLock<Plans> = LazyLock::new(|| {
    let per_minute = |n| Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]).unwrap();
    Plans::new([
        Plan::new("free", per_minute(10)).unwrap(),
        Plan::new("pro", per_minute(100)).unwrap(),
    ])
    .unwrap()
});

fn plan_of(parts: &Parts) -> Option<Plan> {
    let key = parts.headers.get("x-api-key")?.to_str().ok()?;
    PLANS.get(if key.starts_with("pro-") { "pro" } else { "free" })
}

fn batch_size(parts: &Parts) -> u64 {
    let size = parts.headers.get("x-batch-size").and_then(|v| v.to_str().ok());
    size.and_then(|n| n.parse().ok()).unwrap_or(1)
}

fn asks_to_wait(parts: &Parts) -> bool {
    parts.uri.query().is_some_and(|q| q.split('&').any(|p| p == "wait=1"))
}

#[rate_limit(rules = [(10, 60s)], by = header("x-api-key"), plans = plan_of, allow = ["10.0.0.0/8", "192.0.2.7"], allow_identities = ["internal"], shadow)]
async fn search() -> &'static str {
    "results"
}

#[rate_limit(concurrency = 2, by = user, wait = 2s)]
async fn export() -> &'static str {
    "exported"
}

#[rate_limit(rules = [(5, 60s)], by = user, wait = 2s, wait_when = asks_to_wait, concurrency = 3)]
async fn reply() -> &'static str {
    "replied"
}

#[rate_limit(rules = [(5, 60s)], by = user, penalty(after = 3, within = 10m, block = [15m, 1h, 1d]))]
async fn comment() -> &'static str {
    "commented"
}

#[rate_limit(rules = [(5, 60s)], by = ip, penalty(block = 30s, within = 1m, after = 1))]
async fn login() -> &'static str {
    "welcome"
}

fn not_a_conflict(status: axum::http::StatusCode, _headers: &axum::http::HeaderMap) -> bool {
    status != axum::http::StatusCode::CONFLICT
}

#[rate_limit(rules = [(5, 60s)], by = ip, count_failures)]
async fn sign_in() -> axum::http::StatusCode {
    axum::http::StatusCode::UNAUTHORIZED
}

#[rate_limit(algorithm = fixed_window, rules = [(3, 1h)], count_when = not_a_conflict, penalty(after = 2, within = 1h, block = 1h))]
async fn sign_up() -> axum::http::StatusCode {
    axum::http::StatusCode::CONFLICT
}

#[rate_limit(algorithm = token_bucket(rate = 10/s, burst = 100), cost = batch_size)]
async fn import() -> &'static str {
    "imported"
}

fn main() {
    let _: Router = Router::new()
        .route("/search", get(search))
        .route("/exports", post(export))
        .route("/replies", post(reply))
        .route("/imports", post(import))
        .route("/comments", post(comment))
        .route("/login", post(login))
        .route("/sign-in", post(sign_in))
        .route("/sign-up", post(sign_up))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
}
