use limiter_tower::{Plan, rate_limit};

fn plan_of(key: &str) -> Option<Plan> {
    let _ = key;
    None
}

#[rate_limit(rules = [(10, 60s)], by = header("x-api-key"), plans = plan_of)]
async fn search() {}

fn main() {}
