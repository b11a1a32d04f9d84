use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s), (1000, 367d)])]
async fn create_post() {}

fn main() {}
