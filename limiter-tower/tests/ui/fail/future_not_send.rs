use std::rc::Rc;

use limiter_tower::rate_limit;

async fn store(_post: &str) {}

#[rate_limit(rules = [(10, 60s)])]
async fn create_post(body: String) -> String {
    let post = Rc::new(body);
    store(&post).await;
    post.to_string()
}

fn main() {}
