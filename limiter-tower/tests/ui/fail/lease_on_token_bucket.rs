use limiter_tower::rate_limit;

#[rate_limit(algorithm = token_bucket(rate = 10/s, burst = 10), lease = 5)]
async fn feed() {}

fn main() {}
