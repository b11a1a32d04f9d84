use limiter_tower::rate_limit;

#[rate_limit(rules = [(5, 1s)], by = ip, sample = 10)]
async fn views() {}

fn main() {}
