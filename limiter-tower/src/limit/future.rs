use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use http::Request;
use limiter_core::Permit;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::admission::Pending;
use super::answer::Reading;
use super::detached::Detached;
use super::permit_body::PermitBody;
use super::refund::Refund;
use super::route::RouteLimit;
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
        // Waiting for a store that does not decide at once (or for a
        // permit, or for the retry time). What waits with the check is
        // boxed: this state is rare on the fast path (the memory store
        // decides in `call`), and a small future is cheap to move.
        Checking {
            pending: Pending,
            waiting: Option<Box<Waiting<S, B>>>,
        },
        // A leaky bucket's request waiting its turn before the inner call,
        // with the permit it holds, if any.
        Pacing {
            sleep: Pin<Box<tokio::time::Sleep>>,
            paced: Option<Box<Paced<S, B>>>,
        },
        // The inner call of a request holding a concurrency permit: the
        // permit goes with the response body. What it holds is boxed, so
        // that this state is no larger than `Calling`: every request's
        // future is as large as its largest state.
        Holding {
            #[pin]
            future: S::Future,
            held: Option<Box<(Option<RateLimitHeaders>, Permit)>>,
        },
        // The inner call of a request counted by outcome: its response
        // says whether it is given back. Boxed, as `Holding` is.
        Counting {
            #[pin]
            future: S::Future,
            counting: Option<Box<Counting>>,
        },
        // A response waiting for its request to be given back.
        Refunding {
            refunding: Option<Box<(Detached, Response)>>,
        },
        Responding {
            response: Option<Response>,
        },
    }
}

/// What the response of a request counted by outcome gets: its fields, the
/// permit its body holds, and the refund its status may call for.
pub(crate) struct Counting {
    headers: Option<RateLimitHeaders>,
    permit: Option<Permit>,
    refund: Box<Refund>,
}

/// A paced request: the ready inner service, the request, its fields and
/// its permit.
type Paced<S, B> = (S, Request<B>, Option<RateLimitHeaders>, Option<Permit>);

/// What waits for a store's answer: a ready inner service, the request,
/// and how the answer is read.
pub(crate) struct Waiting<S, B> {
    pub(crate) inner: S,
    pub(crate) request: Request<B>,
    pub(crate) limit: Arc<RouteLimit>,
    pub(crate) reading: Reading,
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    /// Calls `inner`, which is ready, now or after `delay` (keeping it, and
    /// leaving a clone in its place), and adds `headers` to its response.
    #[inline(always)]
    pub(crate) fn proceed(
        inner: &mut S,
        request: Request<B>,
        headers: Option<RateLimitHeaders>,
        delay: Duration,
    ) -> Self
    where
        S: Clone,
    {
        // Each state is built where it is returned: the inner future is
        // not moved again.
        if delay.is_zero() {
            return Self {
                state: State::Calling {
                    future: inner.call(request),
                    headers,
                },
            };
        }
        let clone = inner.clone();
        let ready = std::mem::replace(inner, clone);
        Self {
            state: State::Pacing {
                sleep: Box::pin(tokio::time::sleep(delay)),
                paced: Some(Box::new((ready, request, headers, None))),
            },
        }
    }

    /// Like [`proceed`](Self::proceed), the response body holding `permit`
    /// until it ends or is dropped.
    #[inline]
    pub(crate) fn proceed_holding(
        inner: &mut S,
        request: Request<B>,
        headers: Option<RateLimitHeaders>,
        delay: Duration,
        permit: Option<Permit>,
    ) -> Self
    where
        S: Clone,
    {
        let Some(permit) = permit else {
            return Self::proceed(inner, request, headers, delay);
        };
        let state = if delay.is_zero() {
            State::Holding {
                future: inner.call(request),
                held: Some(Box::new((headers, permit))),
            }
        } else {
            let clone = inner.clone();
            let ready = std::mem::replace(inner, clone);
            State::Pacing {
                sleep: Box::pin(tokio::time::sleep(delay)),
                paced: Some(Box::new((ready, request, headers, Some(permit)))),
            }
        };
        Self { state }
    }

    /// Like [`proceed_holding`](Self::proceed_holding), giving the request
    /// back (`refund`) if its response says it does not count. The
    /// algorithms that give requests back never pace, so nothing waits.
    pub(crate) fn proceed_counting(
        inner: &mut S,
        request: Request<B>,
        headers: Option<RateLimitHeaders>,
        delay: Duration,
        permit: Option<Permit>,
        refund: Option<Box<Refund>>,
    ) -> Self
    where
        S: Clone,
    {
        let Some(refund) = refund else {
            return Self::proceed_holding(inner, request, headers, delay, permit);
        };
        debug_assert!(delay.is_zero(), "a paced request is never given back");
        Self {
            state: State::Counting {
                future: inner.call(request),
                counting: Some(Box::new(Counting {
                    headers,
                    permit,
                    refund,
                })),
            },
        }
    }

    /// Answers `response` without calling the inner service.
    pub(crate) fn respond(response: Response) -> Self {
        Self {
            state: State::Responding {
                response: Some(response),
            },
        }
    }

    /// Waits for `pending`, then lets the limit answer.
    pub(crate) fn checking(pending: Pending, waiting: Waiting<S, B>) -> Self {
        Self {
            state: State::Checking {
                pending,
                waiting: Some(Box::new(waiting)),
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

    /// Polls the inner call here, small enough to inline into the caller's
    /// poll (the path of every allowed request); the other states advance
    /// out of line.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            if let StateProj::Calling { future, headers } = state.as_mut().project() {
                // Moved as it is when it has an axum body already.
                let mut response = ready!(future.poll(cx))?.map(Body::new);
                if let Some(headers) = headers.take() {
                    headers.add_to(response.headers_mut());
                }
                return Poll::Ready(Ok(response));
            }
            if let StateProj::Holding { future, held } = state.as_mut().project() {
                return poll_holding(future, held, cx);
            }
            if matches!(&*state, State::Counting { .. } | State::Refunding { .. }) {
                return State::poll_counting(state.as_mut(), cx);
            }
            if let Some(response) = ready!(State::advance(state.as_mut(), cx)) {
                return Poll::Ready(Ok(response));
            }
        }
    }
}

impl<S, B, ResBody> State<S, B>
where
    S: Service<Request<B>, Response = http::Response<ResBody>>,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    /// Polls the inner call of a request counted by outcome, then the
    /// refund its response calls for, if any. Out of line: the path of
    /// every other request stays as it was.
    #[cold]
    #[inline(never)]
    fn poll_counting(
        mut state: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response, S::Error>> {
        if let StateProj::Counting { future, counting } = state.as_mut().project() {
            let (response, refunding) = ready!(poll_counted_call(future, counting, cx))?;
            match refunding {
                None => return Poll::Ready(Ok(response)),
                Some(refunding) => state.set(State::Refunding {
                    refunding: Some(Box::new((refunding, response))),
                }),
            }
        }
        let StateProj::Refunding { refunding } = state.project() else {
            unreachable!("polled in another state")
        };
        let waiting = refunding.as_mut().expect("polled after completion");
        ready!(waiting.0.poll(cx));
        let (_, response) = *refunding.take().expect("polled after completion");
        Poll::Ready(Ok(response))
    }
}

impl<S, B> State<S, B>
where
    S: Service<Request<B>> + Clone,
{
    /// Moves on from a state before the inner call: to the next state, or
    /// to the limiter's own response.
    #[cold]
    #[inline(never)]
    fn advance(mut state: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Response>> {
        match state.as_mut().project() {
            StateProj::Checking { pending, waiting } => {
                let admission = ready!(pending.poll(cx));
                let Waiting {
                    mut inner,
                    request,
                    limit,
                    reading,
                } = *waiting.take().expect("polled after completion");
                let next = limit.answer(admission, reading, &mut inner, request);
                state.set(next.state);
            }
            StateProj::Pacing { sleep, paced } => {
                ready!(sleep.as_mut().poll(cx));
                let (mut inner, request, headers, permit) =
                    *paced.take().expect("polled after completion");
                state.set(match permit {
                    None => State::Calling {
                        future: inner.call(request),
                        headers,
                    },
                    Some(permit) => State::Holding {
                        future: inner.call(request),
                        held: Some(Box::new((headers, permit))),
                    },
                });
            }
            StateProj::Responding { response } => {
                return Poll::Ready(Some(response.take().expect("polled after completion")));
            }
            StateProj::Calling { .. }
            | StateProj::Holding { .. }
            | StateProj::Counting { .. }
            | StateProj::Refunding { .. } => {
                unreachable!("the inner call is polled by `poll`")
            }
        }
        Poll::Ready(None)
    }
}

/// Polls the inner call of a request holding a permit, which its response
/// body then holds.
#[inline(never)]
fn poll_holding<F, E, ResBody>(
    future: Pin<&mut F>,
    held: &mut Option<Box<(Option<RateLimitHeaders>, Permit)>>,
    cx: &mut Context<'_>,
) -> Poll<Result<Response, E>>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let response = ready!(future.poll(cx))?;
    let (headers, permit) = *held.take().expect("polled after completion");
    let mut response = response.map(|body| Body::new(PermitBody::new(body, Some(permit))));
    if let Some(headers) = headers {
        headers.add_to(response.headers_mut());
    }
    Poll::Ready(Ok(response))
}

/// Polls the inner call of a request counted by outcome; once its response
/// is there, gives the request back if the response says it does not
/// count, and answers the response with the refund still under way, if any.
#[inline(never)]
#[allow(clippy::type_complexity)]
fn poll_counted_call<F, E, ResBody>(
    future: Pin<&mut F>,
    counting: &mut Option<Box<Counting>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(Response, Option<Detached>), E>>
where
    F: Future<Output = Result<http::Response<ResBody>, E>>,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let response = ready!(future.poll(cx))?;
    let Counting {
        headers,
        permit,
        refund,
    } = *counting.take().expect("polled after completion");
    let refunding = refund.settle(response.status(), response.headers(), cx);
    let mut response = match permit {
        Some(permit) => response.map(|body| Body::new(PermitBody::new(body, Some(permit)))),
        None => response.map(Body::new),
    };
    if let Some(headers) = headers {
        headers.add_to(response.headers_mut());
    }
    Poll::Ready(Ok((response, refunding)))
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
