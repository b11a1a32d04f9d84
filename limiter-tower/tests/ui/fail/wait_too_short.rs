use limiter_tower::rate_limit;

#[rate_limit(rules = [(5, 60s)], wait = 0ms)]
async fn reply() {}

fn main() {}
