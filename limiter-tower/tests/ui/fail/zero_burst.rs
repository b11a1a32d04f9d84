use limiter_tower::rate_limit;

#[rate_limit(algorithm = token_bucket(rate = 1/s, burst = 0))]
async fn like() {}

fn main() {}
