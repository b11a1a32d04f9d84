use limiter_tower::rate_limit;

#[rate_limit(by = ip, prevent_duplicate)]
async fn create_post() {}

fn main() {}
