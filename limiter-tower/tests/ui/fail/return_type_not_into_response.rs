use axum::Router;
use axum::routing::post;
use limiter_tower::rate_limit;

struct Post;

#[rate_limit(rules = [(10, 60s)])]
async fn create_post(_body: String) -> Post {
    Post
}

fn main() {
    let _: Router = Router::new().route("/posts", post(create_post));
}
