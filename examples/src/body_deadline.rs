//! A deadline for a request's body: whatever of it has not arrived a fixed
//! time after its head did is not waited for. The request is answered
//! `408 Request Timeout` and its connection closed.
//!
//! A header-read timeout alone leaves the body open: a client that sends a
//! whole head and then one byte of its body every few seconds holds its
//! connection, and a connection slot, for as long as it likes. Hundreds
//! of such clients fill every slot the server has, and nothing else is
//! served. tower-http's `RequestBodyTimeoutLayer` does not stop them: it
//! times out the wait for each next piece of the body, which a client
//! sending a byte every few seconds never exceeds. So this deadline is
//! written here: one timer per request, armed when the head arrives,
//! never reset.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use http::header::CONNECTION;
use http::{HeaderValue, Request, StatusCode};
use http_body::{Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::{Service, ServiceExt};

/// Calls `service` with `request`'s body read under a deadline of
/// `deadline` from now: a body still arriving then answers `408 Request
/// Timeout` with `Connection: close`, whatever the handler made of the
/// error.
pub async fn read_within<S, B>(
    service: S,
    request: Request<B>,
    deadline: Duration,
) -> Result<Response, Infallible>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let late = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(Deadline {
            body,
            timer: tokio::time::sleep(deadline),
            late: Arc::clone(&late),
        })
    });
    let response = service.oneshot(request).await?;
    if late.load(Ordering::Relaxed) {
        return Ok(too_late());
    }
    Ok(response)
}

/// The answer to a request whose body came too late.
fn too_late() -> Response {
    let mut response = (
        StatusCode::REQUEST_TIMEOUT,
        "the request's body did not arrive in time\n",
    )
        .into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

pin_project! {
    /// A body that fails once its timer has run out, saying so in `late`.
    struct Deadline<B> {
        #[pin]
        body: B,
        #[pin]
        timer: Sleep,
        late: Arc<AtomicBool>,
    }
}

impl<B> HttpBody for Deadline<B>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        // The body first: what arrived in time is read, however late the
        // handler reads it (a request that waited its turn); only a body
        // still not there when the timer runs out fails.
        if let Poll::Ready(frame) = this.body.poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if this.timer.poll(cx).is_ready() {
            this.late.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(
                Err("the request's body did not arrive in time".into()),
            ));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body sent whole at once, read by a handler only after the
    /// deadline (as a request waiting its turn reads it): read whole.
    #[tokio::test]
    async fn a_body_that_arrived_in_time_is_read_however_late() {
        let router = axum::Router::new().route(
            "/",
            axum::routing::post(|request: Request<Body>| async move {
                tokio::time::sleep(Duration::from_millis(150)).await;
                let body = axum::body::to_bytes(request.into_body(), 1024).await;
                body.map(|bytes| bytes.len().to_string())
                    .unwrap_or_else(|error| error.to_string())
            }),
        );
        let request = Request::post("/").body(Body::from("hello")).unwrap();
        let response = read_within(router, request, Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"5");
    }
}
