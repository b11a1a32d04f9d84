use limiter_tower::rate_limit;

struct Posts;

impl Posts {
    #[rate_limit(rules = [(10, 60s)])]
    async fn create() {}
}

fn main() {
    let _ = Posts;
}
