//! A standalone Redis, found at a URL or through Redis Sentinel: one
//! multiplexed connection to the primary, made again when it breaks or when
//! the node turns out not to be the primary any more.

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use redis::{AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, RedisError};

use super::RedisConfig;
use super::link::Link;
use super::lua::{self, Lua, Routed};
use super::multiplexed::{Address, Connection, Multiplexed};
use super::sentinel::{self, Watcher};
use limiter_core::Error;

pub(crate) struct Primary {
    locator: Locator,
    link: Arc<Link<Connection>>,
    /// Follows Sentinel's announcements of a new primary (Sentinel only),
    /// from the first connection on; stopped when the store is dropped.
    watcher: OnceLock<Watcher>,
    /// Behind Sentinel, where the primary is as last learned: the node a
    /// new connection for the calls reached, or the one a Sentinel named
    /// (its announcement of a switch, or its answer when the watcher
    /// turns to it). The subscription to the notices follows it.
    named: Arc<watch::Sender<Option<Address>>>,
}

/// How the primary is found.
pub(crate) enum Locator {
    /// Always at this URL (whose name may lead elsewhere after a failover).
    Url(Client),
    /// Wherever the Sentinels say.
    Sentinel(Arc<sentinel::Sentinels>),
}

impl Primary {
    pub(crate) fn new(locator: Locator) -> Self {
        Self {
            locator,
            link: Link::new(),
            watcher: OnceLock::new(),
            named: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Starts following the Sentinels' announcements (Sentinel only), once.
    pub(crate) fn watch(&self, config: &RedisConfig) {
        if let Locator::Sentinel(sentinels) = &self.locator {
            self.watcher.get_or_init(|| {
                Watcher::spawn(
                    Arc::clone(sentinels),
                    Arc::downgrade(&self.link),
                    Arc::downgrade(&self.named),
                    config.connection_timeout,
                )
            });
        }
    }

    /// Where the primary is as last learned, and word when that changes
    /// (Sentinel only: `None` for a URL, which names its node itself).
    pub(crate) fn named(&self) -> Option<watch::Receiver<Option<Address>>> {
        self.is_sentinel().then(|| self.named.subscribe())
    }

    pub(crate) fn is_sentinel(&self) -> bool {
        matches!(self.locator, Locator::Sentinel(_))
    }

    async fn connection(&self, config: &RedisConfig) -> Result<(Connection, u64), Error> {
        self.watch(config);
        // Made only when the link connects: not on every call.
        let connect = || {
            // The store's deadline bounds each call as a whole; this
            // per-command timer is the connection's health check: a reply
            // that never came (a black-holed connection) is an I/O error,
            // and the link is made again (see `run`) instead of waiting on
            // TCP's retransmissions.
            let options = AsyncConnectionConfig::new()
                .set_response_timeout(Some(config.response_timeout))
                .set_connection_timeout(Some(config.connection_timeout));
            let locator = match &self.locator {
                Locator::Url(client) => Err(client.clone()),
                Locator::Sentinel(sentinels) => Ok(Arc::clone(sentinels)),
            };
            let named = Arc::clone(&self.named);
            async move {
                let sentinel = locator.is_ok();
                let client = match locator {
                    Err(client) => client,
                    Ok(sentinels) => sentinels.primary().await?,
                };
                let address = address(client.get_connection_info()).map(Arc::new);
                let connection = Multiplexed::open(&client, &options).await?;
                if let (true, Some(reached)) = (sentinel, &address) {
                    sentinel::name(&named, reached);
                }
                Ok(Connection {
                    connection,
                    address,
                })
            }
        };
        self.link.get(connect, config.connection_timeout).await
    }

    /// A client for the primary: the URL's; behind Sentinel, the node last
    /// learned to be the primary (see [`named`](Self::named)), else the
    /// one the Sentinels name now.
    pub(crate) async fn client(&self) -> Result<Client, Error> {
        match &self.locator {
            Locator::Url(client) => Ok(client.clone()),
            Locator::Sentinel(sentinels) => {
                let named = self.named.borrow().clone();
                match named {
                    Some((host, port)) => Client::open((host.as_str(), port)),
                    None => sentinels.primary().await,
                }
                .map_err(crate::redis_error)
            }
        }
    }

    /// Connects, unless connected.
    pub(crate) async fn connect(&self, config: &RedisConfig) -> Result<(), Error> {
        self.connection(config).await.map(drop)
    }

    /// Runs `call` (an EVALSHA of `lua`) on the primary.
    ///
    /// A node that is not the primary (any more) refuses the script before
    /// running it, with `READONLY` (a replica, such as a demoted primary) or
    /// `MASTERDOWN` (a replica cut off from its primary): the connection is
    /// dropped and the call is sent once more to the primary found anew (the
    /// Sentinels' answer, or the URL's name resolved again). It never runs
    /// twice: the refusal proves it did not run.
    pub(crate) async fn run<T: redis::FromRedisValue>(
        &self,
        lua: &Lua,
        call: &Cmd,
        config: &RedisConfig,
    ) -> Result<T, Error> {
        let mut found_anew = false;
        loop {
            let (mut primary, id) = self.connection(config).await?;
            let error =
                match lua::run(&mut Routed(&mut primary.connection.connection), lua, call).await {
                    Ok(reply) => return Ok(reply),
                    Err(error) => error,
                };
            if is_not_primary(&error) {
                self.link.forget(id);
                if !found_anew {
                    tracing::warn!(
                        %error,
                        node = ?primary.address,
                        "Redis answered as a replica: finding the primary again"
                    );
                    found_anew = true;
                    continue;
                }
            } else if error.is_connection_dropped()
                || error.is_unrecoverable_error()
                || error.is_io_error()
            {
                self.link.forget(id);
            }
            return Err(crate::redis_error(error));
        }
    }
}

/// Whether the node answered as a replica: it refused the call before
/// running it, and another node is (or will be) the primary.
pub(crate) fn is_not_primary(error: &RedisError) -> bool {
    use redis::ServerErrorKind::{MasterDown, ReadOnly};
    matches!(
        error.kind(),
        redis::ErrorKind::Server(ReadOnly | MasterDown)
    )
}

/// The node a client connects to.
pub(crate) fn address(info: &ConnectionInfo) -> Option<Address> {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some((host.clone(), *port))
        }
        _ => None,
    }
}
