//! Trending: one quota for every client together (`by = global`), which
//! protects the backend behind it. Keys end in `trending-trending`.
//!
//! Every request of every client counts against one key: without a lease,
//! each would be one call to the one Redis thread that owns it. Leased,
//! each instance takes up to 50 permits per call and hands them out
//! locally for at most 100 ms, never admitting more than 1,000 in any
//! second across all instances.

use axum::Json;
use axum::response::IntoResponse;
use limiter_tower::rate_limit;
use serde_json::json;

/// What is trending: at most 1,000 requests a second, in total.
#[rate_limit(rules = [(1000, 1s)], by = global, lease = 50)]
pub(crate) async fn trending() -> impl IntoResponse {
    Json(json!({ "posts": [] }))
}
