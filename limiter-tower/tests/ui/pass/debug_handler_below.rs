//! `#[axum::debug_handler]` below `#[rate_limit]` checks the function, and
//! the handler is limited as usual.
#![deny(warnings)]

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use limiter_tower::rate_limit;

#[derive(Clone)]
struct App;

#[rate_limit(rules = [(10, 60s)], by = ip)]
#[axum::debug_handler]
async fn create_post(State(_app): State<App>, Path(id): Path<u64>, body: String) -> String {
    format!("{id}: {body}")
}

#[rate_limit(algorithm = token_bucket(rate = 1/s, burst = 10))]
#[axum::debug_handler(state = App)]
async fn like() {}

fn main() {
    let _: Router = Router::new()
        .route("/posts/{id}", post(create_post))
        .route("/likes", post(like))
        .with_state(App);
}
