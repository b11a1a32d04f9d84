//! What the compiler says of an argument that extracts nothing: it is
//! reported where the handler is routed. `#[axum::debug_handler]` below
//! `#[rate_limit]` reports it on the argument.
use axum::Router;
use axum::routing::post;
use limiter_tower::rate_limit;

#[rate_limit(rules = [(10, 60s)])]
async fn create_post(id: u64, body: String) -> String {
    format!("{id}: {body}")
}

fn main() {
    let _: Router = Router::new().route("/posts", post(create_post));
}
