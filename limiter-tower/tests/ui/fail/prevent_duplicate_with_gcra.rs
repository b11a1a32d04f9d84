use limiter_tower::rate_limit;

#[rate_limit(algorithm = gcra(rate = 100/60s, burst = 20), prevent_duplicate)]
async fn feed() {}

fn main() {}
