//! How a route's limit finds the router layer: while the layer calls and
//! polls below it, through layers in between, the innermost layer winning,
//! and never after the layer's future is done.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::routing::post;
use limiter_tower::{KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
use tower::buffer::BufferLayer;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

/// One request a minute for everyone.
fn once_a_minute(name: &str) -> LimitLayer {
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    LimitLayer::new(name, policy, KeySource::global())
}

fn layer() -> LimiterLayer {
    LimiterLayer::new(Limiter::new(MemoryStore::new()))
}

async fn status(router: &Router, path: &str) -> StatusCode {
    let request = Request::post(path).body(Body::empty()).unwrap();
    router.clone().oneshot(request).await.unwrap().status()
}

#[tokio::test]
async fn a_route_behind_a_buffer_finds_the_router_layer() {
    let buffered = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|_: BoxError| async {
            StatusCode::SERVICE_UNAVAILABLE
        }))
        .layer(BufferLayer::new(8));
    let route = post(|| async { "ok" })
        .layer::<_, Infallible>(once_a_minute("posts"))
        .layer(buffered);
    let router = Router::new().route("/posts", route).layer(layer());
    assert_eq!(status(&router, "/posts").await, StatusCode::OK);
    assert_eq!(
        status(&router, "/posts").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn the_innermost_router_layer_is_the_one_used() {
    // The two layers differ in what a request without a user gets.
    let by_user = |name| {
        let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
        LimitLayer::new(name, policy, KeySource::user())
    };
    let inner = Router::new()
        .route(
            "/replies",
            post(|| async { "ok" }).layer(by_user("replies")),
        )
        .layer(
            layer()
                .user(|_| None)
                .missing_identity_status(StatusCode::FORBIDDEN),
        );
    let router = Router::new()
        .route("/posts", post(|| async { "ok" }).layer(by_user("posts")))
        .nest("/inner", inner)
        .layer(layer().user(|_| None));
    assert_eq!(status(&router, "/posts").await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        status(&router, "/inner/replies").await,
        StatusCode::FORBIDDEN
    );
    // And the outer layer's scope is back after the inner one's.
    assert_eq!(status(&router, "/posts").await, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "current_thread")]
async fn the_router_layer_is_not_in_scope_after_its_future() {
    let router = Router::new()
        .route(
            "/posts",
            post(|| async { "ok" }).layer(once_a_minute("posts")),
        )
        .layer(layer());
    assert_eq!(status(&router, "/posts").await, StatusCode::OK);
    // The same thread, a limit without a router layer above it.
    let alone = once_a_minute("alone").layer(tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::empty()))
    }));
    let response = alone.oneshot(Request::new(Body::empty())).await.unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
}

/// Runs the route's future on a task of its own: the case the router
/// layer's documentation names.
#[derive(Clone)]
struct Spawn<S>(S);

impl<S> Service<Request<Body>> for Spawn<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let route = self.0.clone().oneshot(request);
        Box::pin(async move { Ok(tokio::spawn(route).await.unwrap().unwrap()) })
    }
}

#[tokio::test]
async fn a_route_run_on_another_task_answers_500_and_a_route_layer_mends_it() {
    let spawned = post(|| async { "ok" })
        .layer::<_, Infallible>(once_a_minute("posts"))
        .layer(tower::layer::layer_fn(Spawn));
    let router = Router::new().route("/posts", spawned).layer(layer());
    assert_eq!(
        status(&router, "/posts").await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    // The router layer below the spawning service.
    let mended = post(|| async { "ok" })
        .layer::<_, Infallible>(once_a_minute("posts"))
        .layer(layer())
        .layer(tower::layer::layer_fn(Spawn));
    let router = Router::new().route("/posts", mended);
    assert_eq!(status(&router, "/posts").await, StatusCode::OK);
    assert_eq!(
        status(&router, "/posts").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}
