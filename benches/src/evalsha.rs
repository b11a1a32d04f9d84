//! The bare EVALSHA middleware of the HTTP benchmarks: one EVALSHA of the
//! store's GCRA script per request through redis-rs, then the handler, the
//! least any Redis-backed limiter must do. It counts by client address, or
//! by the request's `x-api-key` header (a new one on every request of the
//! distinct-keys load, so no two checks share a key).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use limiter_core::Algorithm;
use limiter_redis::RedisStore;

/// The bare middleware's connection and script.
#[derive(Clone, Debug)]
pub struct Bare {
    connection: redis::aio::MultiplexedConnection,
    script: Arc<redis::Script>,
}

impl Bare {
    /// The middleware's state: `connection`, and the GCRA script of the
    /// Redis store.
    pub fn new(connection: redis::aio::MultiplexedConnection) -> Self {
        let script = redis::Script::new(RedisStore::script_source(Algorithm::Gcra));
        Self {
            connection,
            script: Arc::new(script),
        }
    }

    /// One EVALSHA for `key`, then `next`, or a 429 if the script denies
    /// or fails. The arguments are those the Redis store sends for the
    /// benchmarks' limit, GCRA at 10^9 a second with a burst of 10^9: the
    /// server's time, a cost of 1, a unit of 1, 1,000 units drained a µs,
    /// a capacity of 10^9, GCRA's kind.
    async fn admit(&self, key: String, request: Request, next: Next) -> Response {
        let mut connection = self.connection.clone();
        let reply: redis::RedisResult<Vec<i64>> = self
            .script
            .key(key)
            .arg("")
            .arg(1)
            .arg(1)
            .arg(1000)
            .arg(1_000_000_000)
            .arg("g")
            .invoke_async(&mut connection)
            .await;
        match reply {
            Ok(reply) if reply.first() == Some(&1) => next.run(request).await,
            _ => (StatusCode::TOO_MANY_REQUESTS, "denied").into_response(),
        }
    }
}

/// The bare middleware counting by client address.
pub async fn by_address(
    State(bare): State<Bare>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let key = format!("bare:{}", peer.ip());
    bare.admit(key, request, next).await
}

/// The bare middleware counting by the `x-api-key` header (a 400 without
/// one, as limiter answers a request without its identity).
pub async fn by_api_key(State(bare): State<Bare>, request: Request, next: Next) -> Response {
    let Some(api_key) = request
        .headers()
        .get("x-api-key")
        .and_then(|value| value.to_str().ok())
    else {
        return (StatusCode::BAD_REQUEST, "no x-api-key").into_response();
    };
    let key = format!("bare:{api_key}");
    bare.admit(key, request, next).await
}
