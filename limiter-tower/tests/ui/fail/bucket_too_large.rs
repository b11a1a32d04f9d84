use limiter_tower::rate_limit;

#[rate_limit(algorithm = token_bucket(rate = 1/1d, burst = 1048576))]
async fn like() {}

fn main() {}
