use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 0s)])]
async fn create_post() {}

fn main() {}
