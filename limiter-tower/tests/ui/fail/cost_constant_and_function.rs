use axum::http::request::Parts;
use limiter_tower::rate_limit;

fn batch_size(_: &Parts) -> u64 {
    3
}

#[rate_limit(rules = [(10, 60s)], cost = 2, cost = batch_size)]
async fn import() {}

fn main() {}
