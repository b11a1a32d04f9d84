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
use crate::context::{BoxFuture, HeaderOptions};
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
        // Waiting for a store that does not decide at once. What waits with
        // the check is boxed: this state is rare on the fast path (the memory
        // store decides in `call`), and a small future is cheap to move.
        Checking {
            check: BoxFuture<Result<Verdict, Error>>,
            waiting: Option<Box<Waiting<S, B>>>,
        },
        // A leaky bucket's request waiting its turn before the inner call.
        Pacing {
            sleep: Pin<Box<tokio::time::Sleep>>,
            paced: Option<Box<(S, Request<B>, Option<RateLimitHeaders>)>>,
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

/// What waits for a store's answer.
pub(crate) struct Waiting<S, B> {
    pub(crate) inner: S,
    pub(crate) request: Request<B>,
    pub(crate) headers: HeaderOptions,
    pub(crate) limit: Arc<RouteLimit>,
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>> + Clone,
{
    pub(crate) fn checking(
        check: BoxFuture<Result<Verdict, Error>>,
        waiting: Waiting<S, B>,
    ) -> Self {
        Self {
            state: State::Checking {
                check,
                waiting: Some(Box::new(waiting)),
            },
        }
    }

    /// The future once the store has decided; `inner` is ready.
    pub(crate) fn decided(outcome: Outcome, inner: &mut S, request: Request<B>) -> Self {
        Self {
            state: State::decided(outcome, inner, request),
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

/// What a verdict means for the request.
pub(crate) enum Outcome {
    /// Call the inner service after `delay`, and add `headers` to its response.
    Proceed {
        headers: Option<RateLimitHeaders>,
        delay: Duration,
    },
    /// Answer without calling it.
    Respond(Response),
}

impl<S, B> State<S, B>
where
    S: Service<Request<B>> + Clone,
{
    /// `inner` is ready: called now, or kept (and replaced by a clone) to be
    /// called after pacing.
    fn decided(outcome: Outcome, inner: &mut S, request: Request<B>) -> Self {
        match outcome {
            Outcome::Respond(response) => State::Ready {
                response: Some(response),
            },
            Outcome::Proceed { headers, delay } if delay.is_zero() => State::Calling {
                future: inner.call(request),
                headers,
            },
            Outcome::Proceed { headers, delay } => {
                let clone = inner.clone();
                let ready = std::mem::replace(inner, clone);
                State::Pacing {
                    sleep: Box::pin(tokio::time::sleep(delay)),
                    paced: Some(Box::new((ready, request, headers))),
                }
            }
        }
    }
}

impl<S, B> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response> + Clone,
{
    type Output = Result<Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Checking { check, waiting } => {
                    let verdict = ready!(check.as_mut().poll(cx));
                    let Waiting {
                        mut inner,
                        mut request,
                        headers,
                        limit,
                    } = *waiting.take().expect("polled after completion");
                    let outcome = limit.outcome(verdict, &mut request, headers);
                    this.state.set(State::decided(outcome, &mut inner, request));
                }
                StateProj::Pacing { sleep, paced } => {
                    ready!(sleep.as_mut().poll(cx));
                    let (mut inner, request, headers) =
                        *paced.take().expect("polled after completion");
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
    /// Counts the verdict, then turns it into a call of the inner service or
    /// a response: the same for a store that decided at once and for one
    /// that was awaited.
    pub(crate) fn outcome<B>(
        &self,
        verdict: Result<Verdict, Error>,
        request: &mut Request<B>,
        options: HeaderOptions,
    ) -> Outcome {
        self.counters.record(&verdict, self);
        match verdict {
            Ok(verdict) if verdict.allowed() => {
                let Some(decision) = verdict.decision() else {
                    // Failing open has no decision, so no headers.
                    return Outcome::Proceed {
                        headers: None,
                        delay: Duration::ZERO,
                    };
                };
                let headers = options.on_allowed.then(|| self.headers(decision, options));
                if self.decision_extension {
                    request.extensions_mut().insert(*decision);
                }
                Outcome::Proceed {
                    headers,
                    delay: decision.delay(),
                }
            }
            Ok(Verdict::FailedClosed { retry_after }) => Outcome::Respond(unavailable(
                "The rate limiter cannot decide right now; retry shortly.",
                retry_after,
            )),
            Ok(verdict) => {
                let decision = verdict.decision().expect("a denial has a decision");
                tracing::debug!(
                    limit = %self.name,
                    rule = %decision.rule(),
                    retry_after = ?decision.retry_after(),
                    "rate limited"
                );
                Outcome::Respond(too_many_requests(
                    decision,
                    &self.policy,
                    self.headers(decision, options),
                    self.message.as_deref(),
                ))
            }
            Err(error) => {
                tracing::error!(limit = %self.name, %error, "the rate limiter failed");
                Outcome::Respond(unavailable(
                    "The rate limiter cannot decide right now; retry shortly.",
                    Duration::from_secs(1),
                ))
            }
        }
    }

    fn headers(&self, decision: &Decision, options: HeaderOptions) -> RateLimitHeaders {
        RateLimitHeaders::new(
            &self.policy_header,
            &self.rate_limit_prefixes,
            decision,
            options,
        )
    }
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
