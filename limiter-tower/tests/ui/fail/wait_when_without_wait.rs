use axum::http::request::Parts;
use limiter_tower::rate_limit;

fn asks_to_wait(parts: &Parts) -> bool {
    parts.uri.query() == Some("wait=1")
}

#[rate_limit(rules = [(5, 60s)], wait_when = asks_to_wait)]
async fn reply() {}

fn main() {}
