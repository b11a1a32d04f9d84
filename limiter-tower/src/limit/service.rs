use std::sync::Arc;
use std::task::{Context, Poll};

use axum::BoxError;
use axum::body::{Bytes, HttpBody};
use axum::response::Response;
use http::Request;
use tower_service::Service;

use super::ResponseFuture;
use super::route::RouteLimit;

/// The service of [`LimitLayer`](crate::LimitLayer): checks the request's
/// key, then calls `inner` or answers without calling it (so the handler
/// does not run and the body is not read).
///
/// Any request body; any response body, which comes out as axum's
/// [`Body`](axum::body::Body) (moved as it is when it is one already, boxed
/// otherwise), the body of the limiter's own answers too.
#[derive(Debug, Clone)]
pub struct Limit<S> {
    inner: S,
    limit: Arc<RouteLimit>,
}

impl<S> Limit<S> {
    pub(crate) fn new(inner: S, limit: Arc<RouteLimit>) -> Self {
        Self { inner, limit }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Limit<S>
where
    S: Service<Request<ReqBody>, Response = http::Response<ResBody>> + Clone,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        self.limit.call(&mut self.inner, request)
    }
}
