use limiter_tower::rate_limit;

#[rate_limit(concurrency = 0, by = user)]
async fn export() {}

fn main() {}
