use limiter_tower::rate_limit;

#[rate_limit(rules = [(5, 60s)], by = user, penalty(after = 3, within = 10m, block = [15m, 500ms]))]
async fn reply() -> &'static str {
    "replied"
}

fn main() {}
