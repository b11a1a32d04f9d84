use limiter_tower::rate_limit;

#[rate_limit(rules = [(5, 60s)], allow = ["10.0.0.0/8", "10.0.0.0/33"])]
async fn reply() {}

fn main() {}
