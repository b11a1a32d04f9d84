use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], by = header("X-Api-Key"))]
async fn search() {}

fn main() {}
