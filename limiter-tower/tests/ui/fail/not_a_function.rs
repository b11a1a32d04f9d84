use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)])]
struct CreatePost;

fn main() {
    let _ = CreatePost;
}
