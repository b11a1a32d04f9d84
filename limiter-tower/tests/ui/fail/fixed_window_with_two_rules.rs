use limiter_tower::rate_limit;

#[rate_limit(algorithm = fixed_window, rules = [(10, 60s), (20, 120s)])]
async fn create_post() {}

fn main() {}
