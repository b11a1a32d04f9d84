use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60sec)])]
async fn create_post() {}

fn main() {}
