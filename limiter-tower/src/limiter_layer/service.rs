use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use http::Request;
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::context::Context;
use crate::scope::Scope;

/// The service of [`LimiterLayer`](crate::LimiterLayer): calls `inner`,
/// and polls its future, with the shared context in scope for the limits
/// below.
#[derive(Debug, Clone)]
pub struct LimiterService<S> {
    inner: S,
    context: Arc<Context>,
}

impl<S> LimiterService<S> {
    pub(crate) fn new(inner: S, context: Arc<Context>) -> Self {
        Self { inner, context }
    }
}

impl<S, B> Service<Request<B>> for LimiterService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = LimiterFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // A service may call the limits below at once; axum's routes call
        // them when first polled.
        let scope = Scope::enter(Arc::clone(&self.context));
        // Built in place: the inner future is not moved again.
        LimiterFuture {
            future: self.inner.call(request),
            context: scope.leave(),
        }
    }
}

pin_project! {
    /// The response future of [`LimiterService`]: `inner`'s, polled with the
    /// context in scope.
    pub struct LimiterFuture<F> {
        #[pin]
        future: F,
        context: Option<Arc<Context>>,
    }
}

impl<F: Future> Future for LimiterFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(context) = this.context.take() else {
            return this.future.poll(cx);
        };
        let scope = Scope::enter(context);
        let poll = this.future.poll(cx);
        *this.context = scope.leave();
        poll
    }
}

impl<F> std::fmt::Debug for LimiterFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimiterFuture").finish_non_exhaustive()
    }
}
