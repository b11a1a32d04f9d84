//! `#[debug_handler]` above `#[rate_limit]` checks the handler type, which is
//! not a function; it goes below (see `pass/debug_handler_below.rs`).
use limiter_tower::rate_limit;

#[axum::debug_handler]
#[rate_limit(rules = [(10, 60s)])]
async fn create_post(body: String) -> String {
    body
}

fn main() {}
