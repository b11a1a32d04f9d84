//! One multiplexed connection to one Redis node, whose driver task this
//! store runs itself so that it knows when the connection has ended, and
//! the primary's connection with the address it leads to.
//!
//! A connection the server closed while it sat idle (Redis's `timeout`, a
//! `CLIENT KILL`, a restart, a load balancer or NAT reaping it) is seen
//! closed by its driver as soon as the close arrives. A call never goes out
//! on a connection known closed: the [link](super::link) makes a fresh one
//! first, so such a close costs a reconnection, not a store error, and no
//! decision goes to the failure policy while Redis answers. (A call already
//! written when its connection drops may have run: it is never sent again.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::aio::MultiplexedConnection;

use super::link::Live;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, RedisConnectionInfo, RedisResult};

/// A multiplexed connection and whether its driver has ended. Clones share
/// both.
#[derive(Clone)]
pub struct Multiplexed {
    /// The connection calls are sent on.
    pub connection: MultiplexedConnection,
    closed: Arc<AtomicBool>,
}

impl std::fmt::Debug for Multiplexed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Multiplexed")
            .field(
                "closed",
                &self.closed.load(std::sync::atomic::Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

impl Multiplexed {
    /// Connects to `client`'s node over TCP (or a Unix socket), with
    /// `config`'s response timeout on every call.
    pub async fn open(client: &Client, config: &AsyncConnectionConfig) -> RedisResult<Self> {
        let info = client.get_connection_info();
        let settings = info.redis_settings();
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Self::drive(settings, stream, config).await
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Self::drive(settings, stream, config).await
            }
            // TLS: redis-rs's own connection, whose end is seen only when a
            // call fails.
            _ => Ok(Self {
                connection: client
                    .get_multiplexed_async_connection_with_config(config)
                    .await?,
                closed: Arc::default(),
            }),
        }
    }

    /// Sets the connection up on `stream` and runs its driver in a task of
    /// its own, which marks the connection closed when it ends: when the
    /// server closes the connection (or it breaks), or when every clone of
    /// the connection is dropped.
    async fn drive<S>(
        settings: &RedisConnectionInfo,
        stream: S,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<Self>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (connection, driver) =
            MultiplexedConnection::new_with_config(settings, stream, config.clone()).await?;
        let closed = Arc::new(AtomicBool::new(false));
        let ended = Arc::clone(&closed);
        tokio::spawn(async move {
            driver.await;
            ended.store(true, Ordering::Release);
        });
        Ok(Self { connection, closed })
    }
}

impl Live for Multiplexed {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// A node's `host:port`, as Sentinel names it.
pub(crate) type Address = (String, u16);

/// A connection, and the address it leads to (shared: every call takes a
/// clone of the connection).
#[derive(Clone)]
pub(crate) struct Connection {
    pub(crate) connection: Multiplexed,
    pub(crate) address: Option<Arc<Address>>,
}

impl Live for Connection {
    fn is_closed(&self) -> bool {
        Live::is_closed(&self.connection)
    }
}
