use limiter_tower::rate_limit;

#[rate_limit(algorithm = token_bucket(rate = 1/s, capacity = 10))]
async fn like() {}

fn main() {}
