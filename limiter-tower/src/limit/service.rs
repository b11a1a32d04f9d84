use std::cell::Cell;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use axum::response::Response;
use http::{Request, StatusCode};
use tower_service::Service;

use limiter_core::{Error, Verdict};

use super::ResponseFuture;
use super::future::{Outcome, Waiting};
use super::layer::RouteLimit;
use crate::context::{BoxFuture, Context, Current, HeaderOptions};
use crate::key::{NoKey, build_key};
use crate::response::problem;

thread_local! {
    /// The key buffer of this thread's checks, reused so that a check on a
    /// store that decides at once allocates no key.
    static KEY_BUFFER: Cell<String> = const { Cell::new(String::new()) };
}

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

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let current = Current::take();
        let step = decide(&self.limit, current.context(), &mut request);
        // The scope is whole again before the inner service is called.
        drop(current);
        match step {
            Step::Respond(response) => ResponseFuture::ready(response),
            Step::Proceed(outcome) => ResponseFuture::decided(outcome, &mut self.inner, request),
            Step::Check(check, headers) => {
                // The clone is not ready; keep it and use the one that is.
                let clone = self.inner.clone();
                let waiting = Waiting {
                    inner: std::mem::replace(&mut self.inner, clone),
                    request,
                    headers,
                    limit: Arc::clone(&self.limit),
                };
                ResponseFuture::checking(check, waiting)
            }
        }
    }
}

/// What the check of a request leads to.
enum Step {
    /// Answer without calling the inner service.
    Respond(Response),
    /// The store decided at once.
    Proceed(Outcome),
    /// Await the store.
    Check(BoxFuture<Result<Verdict, Error>>, HeaderOptions),
}

/// Builds the request's key and checks it, with the router layer's context.
fn decide<B>(limit: &RouteLimit, context: Option<&Context>, request: &mut Request<B>) -> Step {
    let Some(context) = context else {
        tracing::error!(
            limit = %limit.name,
            "a rate-limited route was called without a RateLimitLayer on the router: \
             add `.layer(RateLimitLayer::new(limiter))` to the Router (below any layer \
             that runs the route on another task)"
        );
        return Step::Respond(problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Rate limiting is not set up on this server.",
        ));
    };
    let mut key = KEY_BUFFER.take();
    let built = build_key(
        &mut key,
        context,
        &limit.source,
        limit.key_prefix.as_deref(),
        &limit.name,
        request,
    );
    if let Err(no_key) = built {
        KEY_BUFFER.set(key);
        return Step::Respond(no_key_response(no_key, context, limit));
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        tracing::debug!(limit = %limit.name, %key, "checking");
    }
    let (policy, cost, headers) = (&limit.policy, limit.policy.cost(), context.headers);
    // The memory store decides here: no future, no owned key.
    if let Some(verdict) = context.store.check_now(&key, policy, cost) {
        KEY_BUFFER.set(key);
        return Step::Proceed(limit.outcome(verdict, request, headers));
    }
    // `None`: the failure policy of whoever guards the store.
    let on_error = limit.on_store_error.or(context.on_store_error);
    let check = Arc::clone(&context.store).check_owned(key, Arc::clone(policy), cost, on_error);
    Step::Check(check, headers)
}

/// The answer to a request whose key could not be built.
fn no_key_response(no_key: NoKey, context: &Context, limit: &RouteLimit) -> Response {
    match no_key {
        NoKey::Missing(what) => problem(
            context.missing_identity,
            &format!("This route is rate limited per {what}, and the request carries none."),
        ),
        NoKey::Misconfigured(why) => {
            tracing::error!(limit = %limit.name, "{why}");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Rate limiting is misconfigured on this server.",
            )
        }
    }
}
