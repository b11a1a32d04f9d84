use limiter_tower::rate_limit;

#[rate_limit(algorithm = token_bucket(rate = 1/s, burst = 10), rules = [(10, 60s)])]
async fn like() {}

fn main() {}
