use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)], by = header("x api key"))]
async fn search() {}

fn main() {}
