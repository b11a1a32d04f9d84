use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], limit = 5)]
async fn create_post() {}

fn main() {}
