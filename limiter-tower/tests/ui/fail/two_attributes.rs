//! Two `#[rate_limit]` on one handler: one error, on the second, naming
//! the fix (a `LimitLayer` on the route).
use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], by = ip)]
#[rate_limit(rules = [(5, 60s)], by = user)]
async fn create_post(body: String) -> String {
    body
}

fn main() {}
