use limiter_tower::rate_limit;

#[rate_limit(rules = [(1, 1s), (2, 2s), (3, 3s), (4, 4s), (5, 5s), (6, 6s)], prevent_duplicate)]
async fn create_post() {}

fn main() {}
