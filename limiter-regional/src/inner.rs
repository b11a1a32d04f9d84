//! A regional store's state, shared by its clones and its background
//! tasks: its own region, the other regions, its settings, counters and
//! the tables of its asks, heartbeats and relays.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::breaker::PeerBreaker;
use super::config::RegionalConfig;
use super::link::Link;
use super::liveness::Liveness;
use super::outbox::Outbox;
use super::registry::Registry;
use super::shares::share;
use super::stats::Counters;
use limiter_core::SystemClock;
use limiter_redis::RedisStore;

pub(crate) struct Inner {
    pub(crate) local: Local,
    pub(crate) peers: Box<[Peer]>,
    pub(crate) config: RegionalConfig,
    pub(crate) stats: Counters,
    pub(crate) registry: Registry,
    /// How long the latest ask took (µs): a request denied while an ask is
    /// out is told to retry after twice that.
    pub(crate) ask_took_us: AtomicU64,
    pub(crate) liveness: Liveness,
    /// Blocks and denials under way to the other regions.
    pub(crate) relays: Relays,
}

pub(crate) struct Local {
    pub(crate) name: Box<str>,
    /// By name among every region: which share it holds.
    pub(crate) rank: usize,
    pub(crate) link: Link,
    /// The region's blocks and penalty counts (`control.rs`).
    pub(crate) store: RedisStore,
}

pub(crate) struct Peer {
    pub(crate) name: Box<str>,
    pub(crate) rank: usize,
    pub(crate) link: Link,
    pub(crate) breaker: PeerBreaker<SystemClock>,
    /// The region's blocks and penalty counts (`control.rs`).
    pub(crate) store: RedisStore,
    /// The blocks and unblocks it did not confirm, sent again (`outbox.rs`).
    pub(crate) outbox: Outbox,
}

impl Peer {
    /// This region's share of `quota` among `regions`.
    pub(crate) fn share(&self, quota: u64, regions: usize) -> u64 {
        share(quota, regions, self.rank)
    }
}

/// The relays under way.
#[derive(Debug, Default)]
pub(crate) struct Relays {
    pub(crate) in_flight: AtomicUsize,
    pub(crate) idle: Notify,
    /// Whether this region's Redis store follows its blocks' notices.
    pub(crate) following: AtomicBool,
    /// Numbers the blocks and unblocks made, so that a later one of a key
    /// supersedes an earlier one in the outboxes.
    pub(crate) changes: AtomicU64,
    /// Whether the task sending the outboxes' changes again runs.
    pub(crate) redelivering: AtomicBool,
}

impl Inner {
    /// How long an ask may stay out (µs); 0 when there is no one to ask.
    pub(crate) fn ask_timeout_us(&self) -> u64 {
        if self.peers.is_empty() {
            0
        } else {
            self.config.ask_timeout().as_micros() as u64
        }
    }

    /// When a request denied while its region's ask is out should retry:
    /// twice the latest ask's time (its answer is likely in by then), within
    /// the ask timeout. Short, so a deny cache in front does not keep
    /// denying past the answer.
    pub(crate) fn ask_wait(&self) -> Duration {
        let took = Duration::from_micros(self.ask_took_us.load(Ordering::Relaxed));
        (took * 2).clamp(Duration::from_millis(1), self.config.ask_timeout())
    }

    pub(crate) fn regions(&self) -> usize {
        self.peers.len() + 1
    }
}
