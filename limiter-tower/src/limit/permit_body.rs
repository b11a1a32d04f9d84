//! A response body that holds a concurrency permit until it ends.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::body::HttpBody;
use http_body::{Frame, SizeHint};
use limiter_core::Permit;
use pin_project_lite::pin_project;

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
