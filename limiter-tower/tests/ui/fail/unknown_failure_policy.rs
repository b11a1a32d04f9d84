use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], on_store_error = retry)]
async fn create_post() {}

fn main() {}
