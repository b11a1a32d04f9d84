//! The admin router: the [`Control`]'s handles over HTTP, as JSON.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use limiter_core::Error;

use super::Control;
use crate::response::{Protocol, problem};

impl Control {
    /// The admin routes, to mount behind the application's own
    /// authentication (its path, its auth layer; an address is never a
    /// credential):
    ///
    /// | route | answer |
    /// |---|---|
    /// | `GET /limits/{identity}` | 200, a JSON array of [`LimitState`](super::LimitState)s ([`limits`](Self::limits)) |
    /// | `DELETE /limits/{identity}` | 204 once every limit of the identity is reset ([`reset`](Self::reset)) |
    /// | `PUT /blocks/{identity}` | body `{"seconds": N}` (1 to 31,536,000): 204 once blocked on every instance ([`block`](Self::block)); 400 for another body |
    /// | `DELETE /blocks/{identity}` | 204 once unblocked ([`unblock`](Self::unblock)) |
    ///
    /// A store that cannot answer gives 503 (problem+json), one that cannot
    /// peek or reset (the regional store) 501.
    ///
    /// ```
    /// # use limiter_tower::{Limiter, MemoryStore, RateLimitLayer};
    /// # let layer = RateLimitLayer::new(Limiter::new(MemoryStore::new()));
    /// let admin: axum::Router = axum::Router::new().nest("/admin", layer.control().router());
    /// // .layer(your_authentication) on `admin` before merging it into the app
    /// ```
    pub fn router<S>(&self) -> Router<S> {
        Router::new()
            .route("/limits/{identity}", get(limits).delete(reset))
            .route("/blocks/{identity}", put(block).delete(unblock))
            .with_state(self.clone())
    }
}

async fn limits(State(control): State<Control>, Path(identity): Path<String>) -> Response {
    match control.limits(&identity).await {
        Ok(states) => {
            let body = serde_json::to_vec(&states).unwrap_or_default();
            ([(CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(error) => failed(&error),
    }
}

async fn reset(State(control): State<Control>, Path(identity): Path<String>) -> Response {
    match control.reset(&identity).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

/// The longest block the router sets: a year.
const MAX_BLOCK_SECONDS: u64 = 365 * 24 * 3600;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockBody {
    seconds: u64,
}

async fn block(
    State(control): State<Control>,
    Path(identity): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let seconds = match serde_json::from_slice::<BlockBody>(&body) {
        Ok(BlockBody { seconds }) if (1..=MAX_BLOCK_SECONDS).contains(&seconds) => seconds,
        _ => {
            return problem(
                Protocol::Http,
                StatusCode::BAD_REQUEST,
                &format!("The body must be {{\"seconds\": N}}, N from 1 to {MAX_BLOCK_SECONDS}."),
            );
        }
    };
    let duration = std::time::Duration::from_secs(seconds);
    match control.block(&identity, duration).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

async fn unblock(State(control): State<Control>, Path(identity): Path<String>) -> Response {
    match control.unblock(&identity).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => failed(&error),
    }
}

fn failed(error: &Error) -> Response {
    let status = match error {
        Error::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    tracing::warn!(%error, "a limit control call failed");
    problem(
        Protocol::Http,
        status,
        &format!("The limits could not be read or reset: {error}."),
    )
}
