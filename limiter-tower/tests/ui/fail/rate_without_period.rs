use limiter_tower::rate_limit;

#[rate_limit(algorithm = gcra(rate = 100, burst = 20))]
async fn feed() {}

fn main() {}
