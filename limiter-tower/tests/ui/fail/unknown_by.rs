use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], by = ip_address)]
async fn create_post() {}

fn main() {}
