use limiter_tower::rate_limit;

#[rate_limit(rules = [(2, 1s)], by = global, shards = 3)]
async fn trending() {}

fn main() {}
