use limiter_tower::rate_limit;

#[rate_limit(rules = [(1000, 1s)], by = global, lease(max = 50, ttl = 1m))]
async fn trending() {}

fn main() {}
