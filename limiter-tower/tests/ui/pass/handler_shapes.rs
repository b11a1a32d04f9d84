//! The handler shapes `#[rate_limit]` accepts: no arguments to sixteen,
//! private and raw names, other attributes, handlers used as axum handlers
//! are (method routers, `Handler` methods, generic routers).
#![deny(warnings)]

use axum::Router;
use axum::extract::{Request, State};
use axum::handler::{Handler, HandlerWithoutStateExt};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, get, on, post};
use limiter_tower::rate_limit;

#[derive(Clone)]
struct Db;

#[rate_limit(rules = [(10, 60s)])]
async fn no_arguments() {}

#[rate_limit(rules = [(10, 60s)])]
async fn whole_request(request: Request) -> String {
    request.uri().to_string()
}

#[rate_limit(rules = [(10, 60s)])]
async fn r#type(method: Method, uri: Uri) -> impl IntoResponse {
    format!("{method} {uri}")
}

/// Sixteen extractors, the most axum takes.
#[rate_limit(rules = [(10, 60s)], by = global)]
#[allow(clippy::too_many_arguments)]
#[expect(unused_variables)]
async fn sixteen(
    a: Method,
    b: Uri,
    c: HeaderMap,
    d: Method,
    e: Uri,
    f: HeaderMap,
    g: Method,
    h: Uri,
    i: HeaderMap,
    j: Method,
    k: Uri,
    l: HeaderMap,
    m: Method,
    n: Uri,
    o: HeaderMap,
    body: String,
) -> Response {
    StatusCode::NO_CONTENT.into_response()
}

#[rate_limit(rules = [(10, 60s)], by = user)]
#[cfg(all())]
pub(crate) async fn with_state(State(_db): State<Db>) -> Result<&'static str, StatusCode> {
    Ok("ok")
}

mod nested {
    use limiter_tower::rate_limit;

    #[rate_limit(algorithm = gcra(rate = 1/s, burst = 1))]
    pub(crate) async fn inner(body: String) -> String {
        body
    }
}

fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(no_arguments).post(whole_request))
        .route("/type", on(MethodFilter::PUT, r#type))
        .route("/sixteen", post(sixteen))
        .route("/nested", post(nested::inner))
}

fn main() {
    let _: Router = routes::<Db>()
        .route("/state", get(with_state))
        .route_service("/service", no_arguments.into_service())
        .route_service("/with-state", with_state.with_state(Db))
        .with_state(Db);
    let _: Router = routes();
    // Handler types are `Copy` unit structs.
    let handler = no_arguments;
    let _ = (handler, handler);
}
