use limiter_tower::rate_limit;

#[rate_limit(algorithm = leaky_bucket(rate = 2/s, capacity = 0))]
async fn upload() {}

fn main() {}
