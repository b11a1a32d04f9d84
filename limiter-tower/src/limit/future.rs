use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use http::Request;
use limiter_core::{Error, Verdict};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::route::{Outcome, RouteLimit};
use crate::context::{BoxFuture, HeaderOptions};
use crate::response::RateLimitHeaders;

pin_project! {
    /// The response future of [`Limit`](crate::Limit): waits for the store
    /// when it does not decide at once, then for a paced request's turn,
    /// then either the inner service's response (with the RateLimit fields
    /// added) or the limiter's own.
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
        Calling {
            #[pin]
            future: S::Future,
            // The fields to add to the inner response, when configured.
            headers: Option<RateLimitHeaders>,
        },
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
        Responding {
            response: Option<Response>,
        },
    }
}

/// What waits for a store's answer: a ready inner service and the request.
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
    /// The future of a request decided at once; `inner` is ready.
    #[inline(always)]
    pub(crate) fn new(outcome: Outcome, inner: &mut S, request: Request<B>) -> Self {
        Self {
            state: State::new(outcome, inner, request),
        }
    }

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
}

impl<S, B> State<S, B>
where
    S: Service<Request<B>> + Clone,
{
    /// `inner` is ready: called now, or kept (and replaced by a clone) to be
    /// called after pacing.
    #[inline(always)]
    fn new(outcome: Outcome, inner: &mut S, request: Request<B>) -> Self {
        match outcome {
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
            Outcome::Respond(response) => State::Responding {
                response: Some(response),
            },
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = http::Response<ResBody>> + Clone,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Output = Result<Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Calling { future, headers } => {
                    // Moved as it is when it has an axum body already.
                    let mut response = ready!(future.poll(cx))?.map(Body::new);
                    if let Some(headers) = headers.take() {
                        headers.add_to(response.headers_mut());
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Checking { check, waiting } => {
                    let verdict = ready!(check.as_mut().poll(cx));
                    let Waiting {
                        mut inner,
                        mut request,
                        headers,
                        limit,
                    } = *waiting.take().expect("polled after completion");
                    let outcome = limit.decide(verdict, &mut request, headers);
                    this.state.set(State::new(outcome, &mut inner, request));
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
                StateProj::Responding { response } => {
                    return Poll::Ready(Ok(response.take().expect("polled after completion")));
                }
            }
        }
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
