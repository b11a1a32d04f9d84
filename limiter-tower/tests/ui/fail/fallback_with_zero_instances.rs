use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], on_store_error = fallback(instances = 0))]
async fn search() {}

fn main() {}
