use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s), (3, 1s)], cost = 4)]
async fn create_post() {}

fn main() {}
