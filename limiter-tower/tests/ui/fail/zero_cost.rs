use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], cost = 0)]
async fn create_post() {}

fn main() {}
