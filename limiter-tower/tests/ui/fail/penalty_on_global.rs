use limiter_tower::rate_limit;

#[rate_limit(rules = [(5, 60s)], by = global, penalty(after = 3, within = 10m, block = 15m))]
async fn trending() -> &'static str {
    "hot"
}

fn main() {}
