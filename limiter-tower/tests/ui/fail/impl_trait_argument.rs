use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)])]
async fn create_post(_body: impl Send) {}

fn main() {}
