//! The function stays callable, without its limit, as `name::unlimited`:
//! the same arguments, the same output.
#![deny(warnings)]

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use limiter_tower::rate_limit;

#[derive(Clone)]
struct App {
    site: &'static str,
}

#[rate_limit(rules = [(1, 60s)], by = global)]
async fn create_post(State(app): State<App>, Path(id): Path<u64>, mut body: String) -> String {
    body.insert_str(0, "> ");
    format!("{} #{id} {body}", app.site)
}

#[rate_limit(algorithm = gcra(rate = 1/s, burst = 1))]
async fn health() -> impl IntoResponse {
    StatusCode::NO_CONTENT
}

/// A handler only its tests call directly.
#[rate_limit(rules = [(1, 60s)])]
async fn unused() {}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Called twice although the limit allows one request a minute: no limit here.
        for _ in 0..2 {
            let post =
                create_post::unlimited(State(App { site: "ugc" }), Path(7), "hi".to_owned()).await;
            assert_eq!(post, "ugc #7 > hi");
        }
        // A local variable cannot take the handler's name: it is a unit struct.
        let response = health::unlimited().await.into_response();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
    });
}
