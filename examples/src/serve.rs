//! Serving a router as a production service should be served, which
//! `axum::serve` cannot do alone: a client gets a bounded time to send each
//! request's head and then its body, and a bounded number of connections is
//! served at once.
//!
//! Without the timeouts, a client that sends half a request and stalls, or
//! drips its body a byte at a time, keeps its connection, and its file
//! descriptor, forever; a few hundred of them (slowloris) fill every slot
//! and nothing is served. With them, such a connection is closed after the
//! timeout (the body's: [`body_deadline`](crate::body_deadline)). The bound
//! keeps the descriptors in use below the process's limit: connections past
//! it wait in the listen backlog until one closes, and are served then.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::Service;

/// The default [`ServeOptions::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default [`ServeOptions::body_read_timeout`]: a few times what a
/// JSON body takes over a slow mobile link, and short enough that slots
/// held by clients dripping their bodies free well before a health check
/// gives up.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The default [`ServeOptions::max_connections`]: well under the usual
/// limit of 1,024 open files, leaving room for the listener, Redis
/// connections and the runtime.
pub const DEFAULT_MAX_CONNECTIONS: usize = 768;

/// How long a graceful shutdown waits for requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How connections are served.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// How long a client may take to send a request's head (request line and
    /// headers), counted from when the server starts waiting for it, so an
    /// idle keep-alive connection too: then the connection is closed.
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's body, counted from
    /// when its head arrived: then the request is answered `408 Request
    /// Timeout` and the connection closed. A body the handler does not
    /// read is not waited for.
    pub body_read_timeout: Duration,
    /// How many connections are served at once; more wait in the listen
    /// backlog until one closes.
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Serves `router` over HTTP/1.1 on `listener`, with the peer address in
/// each request (`ConnectInfo<SocketAddr>`), until `shutdown` completes;
/// then stops accepting and waits up to 30 s for requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut make_service = router.into_make_service_with_connect_info::<SocketAddr>();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A permit first: past the bound, connections wait in the backlog.
        let permit = tokio::select! {
            permit = Arc::clone(&connections).acquire_owned() => permit,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permit else { break };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(service) = make_service.call(peer).await;
        let body_read_timeout = options.body_read_timeout;
        let service = tower::service_fn(move |request| {
            crate::body_deadline::read_within(service.clone(), request, body_read_timeout)
        });
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, "connection closed: {error}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {SHUTDOWN_GRACE:?}; stopping anyway");
    }
}

/// An error of `accept`: one connection's (it was reset before it was
/// accepted) costs nothing; any other, such as running out of file
/// descriptors, is logged and waited out, as `axum::serve` does.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!("accept failed: {error}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
