use limiter_tower::rate_limit;

#[rate_limit(algorithm = gcra(rate = 5/60s, burst = 5), by = ip, count_failures)]
async fn login() -> &'static str {
    "welcome"
}

fn main() {}
