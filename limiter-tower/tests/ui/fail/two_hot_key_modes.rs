use limiter_tower::rate_limit;

#[rate_limit(rules = [(1000, 1s)], by = global, lease = 50, shards = 3)]
async fn trending() {}

fn main() {}
