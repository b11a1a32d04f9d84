use limiter_tower::rate_limit;

#[rate_limit(rules = [(5, 60s)], by = user, penalty(after = 3, block = 15m))]
async fn reply() -> &'static str {
    "replied"
}

fn main() {}
