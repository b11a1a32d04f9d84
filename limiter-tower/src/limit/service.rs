use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use axum::response::Response;
use http::{Request, StatusCode};
use tower_service::Service;

use super::ResponseFuture;
use super::layer::RouteLimit;
use crate::key::{NoKey, build_key};
use crate::rate_limit::ContextExt;
use crate::response::problem;

/// The service of [`LimitLayer`](crate::LimitLayer): checks the request's
/// key, then calls `inner` or answers 429 without calling it (so the handler
/// does not run and the body is not read).
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

impl<S, B> Service<Request<B>> for Limit<S>
where
    S: Service<Request<B>, Response = Response> + Clone,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let limit = &self.limit;
        let Some(ContextExt(context)) = request.extensions().get::<ContextExt>().cloned() else {
            tracing::error!(
                limit = %limit.name,
                "a rate-limited route was called without a RateLimitLayer on the router: \
                 add `.layer(RateLimitLayer::new(limiter))` to the Router"
            );
            return ResponseFuture::ready(problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Rate limiting is not set up on this server.",
            ));
        };
        let (parts, body) = request.into_parts();
        let key = build_key(
            &context,
            &limit.source,
            limit.key_prefix.as_deref(),
            &limit.name,
            &parts,
        );
        let request = Request::from_parts(parts, body);
        match key {
            Ok(key) => {
                if tracing::enabled!(tracing::Level::DEBUG) {
                    tracing::debug!(limit = %limit.name, %key, "checking");
                }
                let on_error = limit.on_store_error.unwrap_or(context.guard.on_store_error);
                let check = Arc::clone(&context.store).check_owned(
                    key,
                    Arc::clone(&limit.policy),
                    limit.policy.cost(),
                    on_error,
                );
                // The clone is not ready; keep it and use the one that is.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::checking(check, inner, request, context, Arc::clone(limit))
            }
            Err(NoKey::Missing(what)) => ResponseFuture::ready(problem(
                context.missing_identity,
                &format!("This route is rate limited per {what}, and the request carries none."),
            )),
            Err(NoKey::Misconfigured(why)) => {
                tracing::error!(limit = %limit.name, "{why}");
                ResponseFuture::ready(problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Rate limiting is misconfigured on this server.",
                ))
            }
        }
    }
}
