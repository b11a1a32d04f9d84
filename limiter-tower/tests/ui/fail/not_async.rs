use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)])]
fn create_post() {}

fn main() {}
