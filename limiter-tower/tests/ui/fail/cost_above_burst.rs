use limiter_tower::rate_limit;

#[rate_limit(algorithm = gcra(rate = 100/60s, burst = 20), cost = 21)]
async fn feed() {}

fn main() {}
