use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, ready};
use std::time::Duration;

use axum::response::Response;
use http::Request;
use limiter_core::{Decision, Error, Verdict};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::layer::RouteLimit;
use crate::context::{BoxFuture, Context};
use crate::response::{RateLimitHeaders, too_many_requests, unavailable};

pin_project! {
    /// The response future of [`Limit`](crate::Limit): waits for the store's
    /// decision, then either calls the inner service or answers 429.
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<Request<B>>,
    {
        Checking {
            check: BoxFuture<Result<Verdict, Error>>,
            inner: Option<S>,
            request: Option<Request<B>>,
            context: Arc<Context>,
            limit: Arc<RouteLimit>,
        },
        // A leaky bucket's request waiting its turn before the inner call.
        Pacing {
            #[pin]
            sleep: tokio::time::Sleep,
            inner: Option<S>,
            request: Option<Request<B>>,
            headers: Option<RateLimitHeaders>,
        },
        Calling {
            #[pin]
            future: S::Future,
            // The headers to add to the inner response, when configured.
            headers: Option<RateLimitHeaders>,
        },
        Ready {
            response: Option<Response>,
        },
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn checking(
        check: BoxFuture<Result<Verdict, Error>>,
        inner: S,
        request: Request<B>,
        context: Arc<Context>,
        limit: Arc<RouteLimit>,
    ) -> Self {
        Self {
            state: State::Checking {
                check,
                inner: Some(inner),
                request: Some(request),
                context,
                limit,
            },
        }
    }

    pub(crate) fn ready(response: Response) -> Self {
        Self {
            state: State::Ready {
                response: Some(response),
            },
        }
    }
}

impl<S, B> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response>,
{
    type Output = Result<Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Checking {
                    check,
                    inner,
                    request,
                    context,
                    limit,
                } => {
                    let verdict = ready!(check.as_mut().poll(cx));
                    record(&verdict, limit);
                    let next = match verdict {
                        Ok(verdict) if verdict.allowed() => {
                            let (mut inner, mut request) = (
                                inner.take().expect("polled after completion"),
                                request.take().expect("polled after completion"),
                            );
                            // Failing open has no decision, so no headers.
                            let headers = verdict
                                .decision()
                                .filter(|_| context.headers.on_allowed)
                                .map(|d| limit.headers(d, context));
                            let delay = verdict.decision().map_or(Duration::ZERO, |d| d.delay());
                            if let Some(decision) = verdict.decision() {
                                // Handlers may read it with `Extension<Decision>`.
                                request.extensions_mut().insert(*decision);
                            }
                            if delay.is_zero() {
                                State::Calling {
                                    future: inner.call(request),
                                    headers,
                                }
                            } else {
                                State::Pacing {
                                    sleep: tokio::time::sleep(delay),
                                    inner: Some(inner),
                                    request: Some(request),
                                    headers,
                                }
                            }
                        }
                        Ok(Verdict::FailedClosed { retry_after }) => State::Ready {
                            response: Some(unavailable(
                                "The rate limiter cannot decide right now; retry shortly.",
                                retry_after,
                            )),
                        },
                        Ok(verdict) => {
                            let decision = verdict.decision().expect("a denial has a decision");
                            tracing::debug!(
                                limit = %limit.name,
                                rule = %decision.rule(),
                                retry_after = ?decision.retry_after(),
                                "rate limited"
                            );
                            State::Ready {
                                response: Some(too_many_requests(
                                    decision,
                                    limit.policy.cost(),
                                    limit.headers(decision, context),
                                    limit.message.as_deref(),
                                )),
                            }
                        }
                        Err(error) => {
                            tracing::error!(limit = %limit.name, %error, "the rate limiter failed");
                            State::Ready {
                                response: Some(unavailable(
                                    "The rate limiter cannot decide right now; retry shortly.",
                                    std::time::Duration::from_secs(1),
                                )),
                            }
                        }
                    };
                    this.state.set(next);
                }
                StateProj::Pacing {
                    sleep,
                    inner,
                    request,
                    headers,
                } => {
                    ready!(sleep.poll(cx));
                    let mut inner = inner.take().expect("polled after completion");
                    let request = request.take().expect("polled after completion");
                    let headers = headers.take();
                    this.state.set(State::Calling {
                        future: inner.call(request),
                        headers,
                    });
                }
                StateProj::Calling { future, headers } => {
                    let mut response = ready!(future.poll(cx))?;
                    if let Some(headers) = headers.take() {
                        headers.add_to(response.headers_mut());
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Ready { response } => {
                    return Poll::Ready(Ok(response.take().expect("polled after completion")));
                }
            }
        }
    }
}

impl RouteLimit {
    fn headers(&self, decision: &Decision, context: &Context) -> RateLimitHeaders {
        RateLimitHeaders::new(
            &self.policy_header,
            &self.rate_limit_prefixes,
            decision,
            context.headers,
        )
    }
}

/// Counts the decision in `limiter_decisions_total`.
fn record(verdict: &Result<Verdict, Error>, limit: &RouteLimit) {
    let (outcome, source) = match verdict {
        Ok(Verdict::Store(d)) => (if d.allowed() { "allowed" } else { "denied" }, "store"),
        Ok(Verdict::Cached(_)) => ("denied", "deny_cache"),
        Ok(Verdict::Fallback(d)) => (if d.allowed() { "allowed" } else { "denied" }, "fallback"),
        Ok(Verdict::FailedOpen) => ("allowed", "fail_open"),
        Ok(Verdict::FailedClosed { .. }) => ("refused", "fail_closed"),
        Ok(_) => ("other", "other"),
        Err(_) => ("error", "error"),
    };
    limit.counters.decision(outcome, source, limit).increment(1);
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
