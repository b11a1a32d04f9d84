use axum::Router;
use axum::routing::post;
use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)])]
fn create_post(body: String) -> String {
    body
}

fn main() {
    // Routed and called as the handler would be: the missing `async` is the only error.
    let _: Router = Router::new().route("/posts", post(create_post));
    let _ = create_post::unlimited(String::new());
}
