use limiter_tower::rate_limit;

#[rate_limit(rules = [(1000, 1s)], by = global, lease(max = 1, ttl = 100ms))]
async fn trending() {}

fn main() {}
