use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use http::Request;
use tower_service::Service;

use super::ContextExt;
use crate::context::Context;

/// The service of [`RateLimitLayer`](crate::RateLimitLayer): puts the shared
/// context into each request for the limits below, then calls `inner`.
#[derive(Debug, Clone)]
pub struct RateLimit<S> {
    inner: S,
    context: Arc<Context>,
}

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, context: Arc<Context>) -> Self {
        Self { inner, context }
    }
}

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        request
            .extensions_mut()
            .insert(ContextExt(Arc::clone(&self.context)));
        self.inner.call(request)
    }
}
