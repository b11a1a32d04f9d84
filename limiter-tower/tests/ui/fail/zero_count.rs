use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s), (0, 120s)])]
async fn create_post() {}

fn main() {}
