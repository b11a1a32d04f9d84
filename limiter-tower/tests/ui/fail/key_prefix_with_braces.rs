use limiter_tower::rate_limit;

#[rate_limit(rules = [(3, 1h)], key = "{signup}")]
async fn sign_up() {}

fn main() {}
