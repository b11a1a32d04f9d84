//! What one store (and its clones) keeps for the notices: who to tell of
//! a reset, the notices it sent that wait for acknowledgements, its
//! failed resets waiting to be counted, and whether its subscription runs
//! and has read the shared state once.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use limiter_core::{Clock, Forget, Forgetter, SystemClock};
use tokio::sync::Notify;

use super::link::lock;

pub(crate) struct Announcer {
    pub(crate) forgetters: Mutex<Vec<Forgetter>>,
    pub(crate) subscribed: AtomicBool,
    /// The ids of this instance's notices: a random start, then counted up,
    /// so no two notices in flight share one.
    pub(crate) next_id: AtomicU64,
    /// The notices this instance published, by id: the acknowledgements seen.
    pub(crate) pending: Mutex<HashMap<u64, Arc<Pending>>>,
    /// The failed resets waiting to be counted in the version hash.
    pub(crate) recounts: Recounts,
    /// Whether a subscription has read the blocks, plans and overrides
    /// whole once, and who waits for it ([`RedisStore::synced`](crate::RedisStore::synced)).
    pub(crate) synced: AtomicBool,
    pub(crate) synced_notify: Notify,
}

impl Default for Announcer {
    fn default() -> Self {
        let seed = foldhash::fast::RandomState::default().hash_one(SystemClock.now_micros());
        Self {
            forgetters: Mutex::default(),
            subscribed: AtomicBool::new(false),
            next_id: AtomicU64::new(seed),
            pending: Mutex::default(),
            recounts: Recounts::default(),
            synced: AtomicBool::new(false),
            synced_notify: Notify::new(),
        }
    }
}

/// The acknowledgements of one notice this instance sent.
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) acks: AtomicUsize,
    pub(crate) notify: Notify,
}

/// The failed resets of one store (and its clones) waiting to be counted,
/// and whether a task is counting them.
#[derive(Debug, Default)]
pub(crate) struct Recounts {
    pub(crate) failed: AtomicU64,
    pub(crate) running: AtomicBool,
}

impl Announcer {
    /// A subscription has read the shared state whole.
    pub(crate) fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
        self.synced_notify.notify_waiters();
    }

    /// Tells every registered owner to forget; drops those that are gone.
    pub(crate) fn forget(&self, what: &Forget) {
        lock(&self.forgetters).retain(|forget| forget(what));
    }

    /// Counts an acknowledgement of the notice `id`, when this instance
    /// sent it.
    pub(crate) fn acknowledged(&self, id: u64) {
        let pending = lock(&self.pending).get(&id).cloned();
        if let Some(pending) = pending {
            pending.acks.fetch_add(1, Ordering::AcqRel);
            pending.notify.notify_waiters();
        }
    }
}
