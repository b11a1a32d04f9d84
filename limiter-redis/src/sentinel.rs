//! Redis Sentinel: where the primary is, and word when it moves.
//!
//! The primary is asked of the Sentinels whenever the store connects (and
//! confirmed with `ROLE` on the node itself). After a failover the old
//! primary may go on accepting writes for seconds, until the Sentinels turn
//! it into a replica, and every write it takes then is lost. So a watcher
//! follows one Sentinel's `+switch-master` announcements and drops the
//! connection to a node that is no longer the primary at once.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{Client, ConnectionInfo, IntoConnectionInfo, RedisError, RedisResult};
use tokio::task::AbortHandle;

use super::link::Link;
use super::multiplexed::{Address, Connection};

/// The channel on which a Sentinel announces a new primary:
/// `<name> <old ip> <old port> <new ip> <new port>`.
const SWITCH_MASTER: &str = "+switch-master";
/// How often the watcher makes sure its Sentinel still answers.
const HEALTH_CHECK: Duration = Duration::from_secs(2);
/// The pause before the watcher turns to the next Sentinel.
const NEXT_SENTINEL: Duration = Duration::from_millis(200);
/// The pause after every Sentinel failed in turn.
const ALL_SENTINELS_FAILED: Duration = Duration::from_secs(1);

pub(crate) struct Sentinels {
    client: tokio::sync::Mutex<SentinelClient>,
    nodes: Vec<ConnectionInfo>,
    service: String,
}

impl Sentinels {
    pub(crate) fn new<'a>(
        urls: impl IntoIterator<Item = &'a str>,
        service: &str,
    ) -> RedisResult<Self> {
        let nodes = urls
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<RedisResult<Vec<_>>>()?;
        let client = SentinelClient::build(
            nodes.clone(),
            service.to_owned(),
            None,
            SentinelServerType::Master,
        )?;
        Ok(Self {
            client: tokio::sync::Mutex::new(client),
            nodes,
            service: service.to_owned(),
        })
    }

    /// A client for the node the Sentinels name as the primary, once it
    /// confirmed that it is one.
    pub(crate) async fn primary(&self) -> RedisResult<Client> {
        self.client.lock().await.async_get_client().await
    }
}

/// The task following the Sentinels' announcements, stopped on drop.
pub(crate) struct Watcher {
    task: AbortHandle,
}

impl Watcher {
    pub(crate) fn spawn(
        sentinels: Arc<Sentinels>,
        link: Weak<Link<Connection>>,
        named: Weak<Named>,
        timeout: Duration,
    ) -> Self {
        let task = tokio::spawn(async move {
            let mut failed_in_a_row = 0;
            let primary = Primary { link, named };
            for node in sentinels.nodes.iter().cycle() {
                match follow(node, &sentinels.service, &primary, timeout).await {
                    Ok(()) => failed_in_a_row = 0,
                    Err(error) => {
                        failed_in_a_row += 1;
                        tracing::debug!(%error, sentinel = ?node.addr(), "lost touch with a Sentinel");
                    }
                }
                if primary.link.strong_count() == 0 {
                    return;
                }
                // Every Sentinel failed: wait longer before the next round.
                let pause = if failed_in_a_row >= sentinels.nodes.len() {
                    failed_in_a_row = 0;
                    ALL_SENTINELS_FAILED
                } else {
                    NEXT_SENTINEL
                };
                tokio::time::sleep(pause).await;
            }
        });
        Self {
            task: task.abort_handle(),
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where the primary is as last learned (the store's `Primary::named`).
pub(crate) type Named = tokio::sync::watch::Sender<Option<Address>>;

/// What the watcher moves when a Sentinel names a new primary: the
/// connection the calls go through, and where the subscription goes.
struct Primary {
    link: Weak<Link<Connection>>,
    named: Weak<Named>,
}

/// Follows one Sentinel until it stops answering.
async fn follow(
    node: &ConnectionInfo,
    service: &str,
    primary_of: &Primary,
    timeout: Duration,
) -> RedisResult<()> {
    let client = Client::open(node.clone())?;
    let (mut sink, mut messages) = within(timeout, client.get_async_pubsub()).await?.split();
    within(timeout, sink.subscribe(SWITCH_MASTER)).await?;
    // A switch announced before the subscription was missed: compare with
    // the primary this Sentinel names now.
    let mut connection = within(timeout, client.get_multiplexed_async_connection()).await?;
    let named: Option<Address> = within(
        timeout,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(service)
            .query_async(&mut connection),
    )
    .await?;
    drop(connection);
    if let Some(primary) = named {
        leave_unless(primary_of, &primary, false);
    }
    let mut health = tokio::time::interval(HEALTH_CHECK);
    health.tick().await;
    loop {
        tokio::select! {
            message = messages.next() => {
                let Some(message) = message else {
                    return Ok(());
                };
                let payload: String = message.get_payload()?;
                if let Some(primary) = switched_to(&payload, service) {
                    leave_unless(primary_of, &primary, true);
                }
            }
            _ = health.tick() => {
                let _: redis::Value = within(timeout, sink.ping()).await?;
            }
        }
    }
}

/// The new primary a `+switch-master` message names, if it is `service`'s.
fn switched_to(payload: &str, service: &str) -> Option<Address> {
    let fields: Vec<&str> = payload.split(' ').collect();
    match fields[..] {
        [name, _, _, ip, port] if name == service => Some((ip.to_owned(), port.parse().ok()?)),
        _ => None,
    }
}

/// Names `primary` as the primary, and drops the connection unless it
/// leads there. An announced switch
/// also abandons a connection being made, which may lead to the old one.
fn leave_unless(primary_of: &Primary, primary: &Address, announced: bool) {
    if let Some(named) = primary_of.named.upgrade() {
        name(&named, primary);
    }
    let Some(link) = primary_of.link.upgrade() else {
        return;
    };
    let stale = |connection: &Connection| connection.address.as_deref() != Some(primary);
    if link.forget_where(stale, announced) {
        tracing::warn!(
            primary = ?primary,
            "Redis Sentinel names a new primary: connecting to it"
        );
    }
}

/// Makes `reached` the primary last learned, telling the subscription when
/// it moved.
pub(crate) fn name(named: &Named, reached: &Address) {
    named.send_if_modified(|named| {
        let moved = named.as_ref() != Some(reached);
        if moved {
            *named = Some(reached.clone());
        }
        moved
    });
}

async fn within<T>(
    timeout: Duration,
    future: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(timeout, future)
        .await
        .unwrap_or_else(|_| {
            Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the Sentinel did not answer in time",
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_new_primary_of_its_own_service_only() {
        let payload = "mymaster 10.0.0.1 6379 10.0.0.2 6380";
        assert_eq!(
            switched_to(payload, "mymaster"),
            Some(("10.0.0.2".to_owned(), 6380))
        );
        assert_eq!(switched_to(payload, "other"), None);
        assert_eq!(switched_to("mymaster 10.0.0.1 6379", "mymaster"), None);
        assert_eq!(
            switched_to("mymaster a 1 b port", "mymaster"),
            None,
            "a port that is not a number"
        );
    }
}
