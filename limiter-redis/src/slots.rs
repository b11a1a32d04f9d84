//! Which node serves which slot of a Redis Cluster: a key's failure domain,
//! so that a guard keeps a breaker per node and a dead master costs only
//! its own keys.
//!
//! The table is read from `CLUSTER SLOTS` when the store connects (awaited
//! by `RedisStore::connect_cluster`), and read
//! again after a redirection or a failure (a failover moves slots to
//! another node), in a task of its own, at most once per
//! [`REFRESH_INTERVAL`]. Until it is known, every key is in domain 0.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{RedisResult, Value};
use tokio::task::AbortHandle;

use super::link::lock;

const SLOTS: usize = 16_384;
/// The least time between two readings of the table.
const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

pub(crate) struct SlotTable {
    /// The failure domain of each slot: 1 + the index of its node in `nodes`.
    owners: Box<[AtomicU64]>,
    /// Every node met, `host:port`; a node keeps its index (and domain).
    nodes: Mutex<Vec<String>>,
    known: AtomicBool,
    refresh: Mutex<Refresh>,
}

#[derive(Default)]
struct Refresh {
    last: Option<Instant>,
    task: Option<AbortHandle>,
}

impl SlotTable {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            owners: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            nodes: Mutex::new(Vec::new()),
            known: AtomicBool::new(false),
            refresh: Mutex::new(Refresh::default()),
        })
    }

    /// The failure domain of the node serving `key`'s slot.
    pub(crate) fn domain(&self, key: &str) -> u64 {
        self.owners[usize::from(slot(key.as_bytes()))].load(Ordering::Relaxed)
    }

    /// The address of the node of failure domain `domain`.
    pub(crate) fn name(&self, domain: u64) -> Option<String> {
        let index = usize::try_from(domain.checked_sub(1)?).ok()?;
        lock(&self.nodes).get(index).cloned()
    }

    /// Whether the table was ever read.
    pub(crate) fn is_known(&self) -> bool {
        self.known.load(Ordering::Acquire)
    }

    /// Reads the table again in the background through `connection`, unless
    /// a reading is under way or one began less than [`REFRESH_INTERVAL`] ago.
    pub(crate) fn refresh(self: &Arc<Self>, connection: &ClusterConnection, timeout: Duration) {
        let mut refresh = lock(&self.refresh);
        if refresh
            .last
            .is_some_and(|last| last.elapsed() < REFRESH_INTERVAL)
        {
            return;
        }
        refresh.last = Some(Instant::now());
        let table = Arc::downgrade(self);
        let connection = connection.clone();
        let task = tokio::spawn(async move {
            let ranges = read(connection, timeout).await;
            if let (Some(ranges), Some(table)) = (ranges, table.upgrade()) {
                table.apply(&ranges);
            }
        });
        refresh.task = Some(task.abort_handle());
    }

    /// Reads the table through `connection` and waits for it (a store
    /// connecting), so that its first calls are already guarded node by
    /// node. A reading that fails leaves the table to the next refresh.
    pub(crate) async fn read_now(&self, connection: &ClusterConnection, timeout: Duration) {
        if let Some(ranges) = read(connection.clone(), timeout).await {
            self.apply(&ranges);
        }
    }

    fn apply(&self, ranges: &[(u16, u16, String)]) {
        let mut nodes = lock(&self.nodes);
        for (first, last, node) in ranges {
            let index = match nodes.iter().position(|n| n == node) {
                Some(index) => index,
                None => {
                    nodes.push(node.clone());
                    nodes.len() - 1
                }
            };
            let domain = index as u64 + 1;
            for slot in *first..=(*last).min(SLOTS as u16 - 1) {
                self.owners[usize::from(slot)].store(domain, Ordering::Relaxed);
            }
        }
        self.known.store(true, Ordering::Release);
    }
}

/// The slot ranges and their nodes, from `CLUSTER SLOTS` of any master that
/// answers within `timeout` (one may be dead); `None` when none does.
async fn read(
    mut connection: ClusterConnection,
    timeout: Duration,
) -> Option<Vec<(u16, u16, String)>> {
    let routing = RoutingInfo::MultiNode((
        MultipleNodeRoutingInfo::AllMasters,
        Some(ResponsePolicy::OneSucceeded),
    ));
    let mut command = redis::cmd("CLUSTER");
    command.arg("SLOTS");
    let reply = tokio::time::timeout(timeout, connection.route_command(command, routing));
    match reply.await {
        Ok(Ok(reply)) => match parse(reply) {
            Ok(ranges) => return Some(ranges),
            Err(error) => tracing::debug!(%error, "unexpected CLUSTER SLOTS reply"),
        },
        Ok(Err(error)) => tracing::debug!(%error, "CLUSTER SLOTS failed"),
        Err(_) => tracing::debug!("CLUSTER SLOTS timed out"),
    }
    None
}

impl Drop for SlotTable {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.refresh).task.take() {
            task.abort();
        }
    }
}

/// `CLUSTER SLOTS`: `[first, last, [host, port, id, ...], replicas...]` per range.
fn parse(reply: Value) -> RedisResult<Vec<(u16, u16, String)>> {
    let entries: Vec<Vec<Value>> = redis::from_redis_value(reply)?;
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let [first, last, master, ..] = &entry[..] else {
            continue;
        };
        let master: Vec<Value> = redis::from_redis_value_ref(master)?;
        let [host, port, ..] = &master[..] else {
            continue;
        };
        let host: String = redis::from_redis_value_ref(host)?;
        let port: u16 = redis::from_redis_value_ref(port)?;
        ranges.push((
            redis::from_redis_value_ref(first)?,
            redis::from_redis_value_ref(last)?,
            format!("{host}:{port}"),
        ));
    }
    Ok(ranges)
}

/// The slot of `key`: CRC16 of its hash tag (the part between the first `{`
/// and the next `}`, when not empty) or of the whole key, modulo 16384.
fn slot(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tag) % SLOTS as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_control_state_lives_in_the_slot_the_guard_names() {
        use crate::notice::{BLOCKS, CHANNEL, OVERRIDES, PENALTY_BLOCKS, PLANS, VERSION};
        let control = slot(limiter_core::CONTROL_STATE_KEY.as_bytes());
        for key in [BLOCKS, OVERRIDES, PENALTY_BLOCKS, PLANS, VERSION, CHANNEL] {
            assert_eq!(slot(key.as_bytes()), control, "{key}");
        }
        assert_eq!(
            slot(b"{limiter:resets}:reports:top-denied:rl:login"),
            control
        );
    }

    #[test]
    fn slots_are_redis_cluster_keyslot() {
        // As `CLUSTER KEYSLOT` answers.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"user1000"), 3443);
        // An empty tag: the whole key.
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }

    #[test]
    fn a_node_keeps_its_domain_and_slots_follow_their_owner() {
        let table = SlotTable::new();
        assert_eq!(table.domain("foo"), 0, "unknown until read");
        table.apply(&[
            (0, 8191, "10.0.0.1:6379".into()),
            (8192, 16383, "10.0.0.2:6379".into()),
        ]);
        assert_eq!(table.domain("bar"), 1);
        assert_eq!(table.domain("foo"), 2);
        // The second node's replica took its slots over.
        table.apply(&[
            (0, 8191, "10.0.0.1:6379".into()),
            (8192, 16383, "10.0.0.3:6379".into()),
        ]);
        assert_eq!((table.domain("bar"), table.domain("foo")), (1, 3));
        assert_eq!(table.name(3).as_deref(), Some("10.0.0.3:6379"));
        assert_eq!(table.name(0), None);
    }
}
