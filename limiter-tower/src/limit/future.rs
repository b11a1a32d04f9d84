//! The response future of a limited service: waits for the store when it
//! does not decide at once, then for a paced request's turn, then answers
//! with the inner response (its fields added, its body holding a
//! concurrency permit) or the limiter's own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use http::Request;
use http_body::{Frame, SizeHint};
use limiter_core::Permit;
use pin_project_lite::pin_project;
use tower_service::Service;

use limiter_core::decide::{Detached, Pending};

use super::admission::{Reading, Settle};
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
        // The inner call. The fields, which most responses get, are kept
        // here; the rest (a permit, a refund) is boxed, one word on the
        // path of every request: a future is as large as its largest state.
        Calling {
            #[pin]
            future: S::Future,
            fields: Option<RateLimitHeaders>,
            after: Option<Box<After>>,
        },
        // Before the inner call: the store's answer, or a paced request's
        // turn. Boxed: the memory store decides in `call`.
        Waiting {
            waiting: Option<Box<Waiting<S, B>>>,
        },
        // The limiter's own response, or the inner one waiting for its
        // request to be given back.
        Responding {
            response: Option<Response>,
            refunding: Option<Detached>,
        },
    }
}

/// What follows a request's admission: what its future is built from
/// ([`ResponseFuture::new`]).
pub(crate) enum Next {
    /// Call the service below after `delay`; its response gets `fields`
    /// and `after`.
    Proceed {
        fields: Option<RateLimitHeaders>,
        delay: Duration,
        after: Option<Box<After>>,
    },
    /// Answer without calling it.
    Respond(Response),
    /// Wait for the store's answer, then let `limit` read it.
    Check {
        pending: Pending,
        limit: Arc<RouteLimit>,
        reading: Reading,
        /// The router layer's settings the request was admitted under.
        context: Arc<crate::context::Context>,
    },
}

impl Next {
    /// Call the service below at once, without fields.
    pub(crate) const UNCHECKED: Self = Self::Proceed {
        fields: None,
        delay: Duration::ZERO,
        after: None,
    };

    /// This, with the response body holding `permit` until it ends or is
    /// dropped, and the request given back (`refund`) if its response says
    /// it does not count. A response of the limiter's own drops both.
    pub(crate) fn holding(self, permit: Option<Permit>, refund: Option<Settle>) -> Self {
        match self {
            Self::Proceed { fields, delay, .. } => {
                // The algorithms that give requests back never pace.
                debug_assert!(refund.is_none() || delay.is_zero());
                let after = (permit.is_some() || refund.is_some())
                    .then(|| Box::new(After { permit, refund }));
                Self::Proceed {
                    fields,
                    delay,
                    after,
                }
            }
            other => other,
        }
    }
}

/// What a response gets besides its fields: the permit its body holds and
/// the refund its status may call for.
pub(crate) struct After {
    permit: Option<Permit>,
    refund: Option<Settle>,
}

/// A request waiting before its inner call: the ready inner service, the
/// request, and what it waits for.
struct Waiting<S, B> {
    inner: S,
    request: Request<B>,
    until: Until,
}

/// What a request waits for before its inner call, and what follows.
enum Until {
    /// The store's answer, for `limit` to read.
    Answer {
        pending: Pending,
        limit: Arc<RouteLimit>,
        reading: Reading,
        context: Arc<crate::context::Context>,
    },
    /// A paced request's turn; then the inner call, whose response gets
    /// `fields` and `after`.
    Turn {
        sleep: Pin<Box<tokio::time::Sleep>>,
        fields: Option<RateLimitHeaders>,
        after: Option<Box<After>>,
    },
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    /// The future of `inner`'s call, under way, whose response gets
    /// `fields` and `after`.
    #[inline(always)]
    pub(crate) fn calling(
        future: S::Future,
        fields: Option<RateLimitHeaders>,
        after: Option<Box<After>>,
    ) -> Self {
        Self {
            state: State::Calling {
                future,
                fields,
                after,
            },
        }
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>> + Clone,
{
    /// The future of what follows a request's admission: `inner` (which is
    /// ready) called now, or, keeping it and leaving a clone in its place,
    /// once what the request waits for is there; or the limiter's own
    /// response.
    #[inline(never)]
    pub(crate) fn new(inner: &mut S, request: Request<B>, next: Next) -> Self {
        // Each state is built where it is returned: the inner future is
        // not moved again.
        let until = match next {
            Next::Proceed {
                fields,
                delay,
                after,
            } if delay.is_zero() => {
                return Self {
                    state: State::Calling {
                        future: inner.call(request),
                        fields,
                        after,
                    },
                };
            }
            Next::Respond(response) => {
                return Self {
                    state: State::Responding {
                        response: Some(response),
                        refunding: None,
                    },
                };
            }
            Next::Proceed {
                fields,
                delay,
                after,
            } => Until::Turn {
                sleep: Box::pin(tokio::time::sleep(delay)),
                fields,
                after,
            },
            Next::Check {
                pending,
                limit,
                reading,
                context,
            } => Until::Answer {
                pending,
                limit,
                reading,
                context,
            },
        };
        let clone = inner.clone();
        let waiting = Waiting {
            inner: std::mem::replace(inner, clone),
            request,
            until,
        };
        Self {
            state: State::Waiting {
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
            if let StateProj::Calling {
                future,
                fields,
                after,
            } = state.as_mut().project()
            {
                let response = ready!(future.poll(cx))?;
                if let Some(after) = after.take() {
                    let (response, refunding) = finish(response, fields.take(), *after, cx);
                    if refunding.is_none() {
                        return Poll::Ready(Ok(response));
                    }
                    state.set(State::Responding {
                        response: Some(response),
                        refunding,
                    });
                    continue;
                }
                // Moved as it is when it has an axum body already.
                let mut response = response.map(Body::new);
                if let Some(fields) = fields.take() {
                    fields.add_to(response.headers_mut());
                }
                return Poll::Ready(Ok(response));
            }
            if let Some(response) = ready!(State::advance(state.as_mut(), cx)) {
                return Poll::Ready(Ok(response));
            }
        }
    }
}

impl<S, B> State<S, B>
where
    S: Service<Request<B>> + Clone,
{
    /// Moves on from a state other than the inner call: to the next state,
    /// or to the response.
    #[cold]
    #[inline(never)]
    fn advance(mut state: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Response>> {
        match state.as_mut().project() {
            StateProj::Waiting { waiting } => {
                let until = &mut waiting.as_mut().expect("polled after completion").until;
                let admission = match until {
                    Until::Answer { pending, .. } => Some(ready!(pending.poll(cx))),
                    Until::Turn { sleep, .. } => {
                        ready!(sleep.as_mut().poll(cx));
                        None
                    }
                };
                let Waiting {
                    mut inner,
                    mut request,
                    until,
                } = *waiting.take().expect("polled after completion");
                let next = match until {
                    Until::Answer {
                        limit,
                        reading,
                        context,
                        ..
                    } => {
                        let admission = admission.expect("the store's answer");
                        limit.answer(admission, reading, &context, &mut request)
                    }
                    Until::Turn { fields, after, .. } => Next::Proceed {
                        fields,
                        delay: Duration::ZERO,
                        after,
                    },
                };
                state.set(ResponseFuture::new(&mut inner, request, next).state);
            }
            StateProj::Responding {
                response,
                refunding,
            } => {
                if let Some(under_way) = refunding {
                    ready!(under_way.poll(cx));
                    *refunding = None;
                }
                return Poll::Ready(Some(response.take().expect("polled after completion")));
            }
            StateProj::Calling { .. } => unreachable!("the inner call is polled by `poll`"),
        }
        Poll::Ready(None)
    }
}

/// What the inner response of a request holding a permit or counted by
/// outcome gets: the body holds the permit, and the request is given back
/// if the response says it does not count; with the refund under way, if
/// it is not made already.
#[cold]
#[inline(never)]
fn finish<ResBody>(
    response: http::Response<ResBody>,
    fields: Option<RateLimitHeaders>,
    after: After,
    cx: &mut Context<'_>,
) -> (Response, Option<Detached>)
where
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let After { permit, refund } = after;
    let refunding = refund.and_then(|refund| refund.settle(&response, cx));
    let mut response = match permit {
        Some(permit) => response.map(|body| Body::new(PermitBody::new(body, Some(permit)))),
        None => response.map(Body::new),
    };
    if let Some(fields) = fields {
        fields.add_to(response.headers_mut());
    }
    (response, refunding)
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

pin_project! {
    /// The body of a response to a request holding a permit: the permit is
    /// given back when the body has sent its last frame or failed, or when
    /// it is dropped (the client went away).
    pub(crate) struct PermitBody<B> {
        #[pin]
        inner: B,
        permit: Option<Permit>,
    }
}

impl<B> PermitBody<B> {
    pub(crate) fn new(inner: B, permit: Option<Permit>) -> Self {
        Self { inner, permit }
    }
}

impl<B: HttpBody> HttpBody for PermitBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if !matches!(frame, Some(Ok(_))) {
            drop(this.permit.take());
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
