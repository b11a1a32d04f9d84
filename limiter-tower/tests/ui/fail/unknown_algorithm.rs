use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], algorithm = sliding_logs)]
async fn create_post() {}

fn main() {}
