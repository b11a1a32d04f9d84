//! The permits of concurrency limits held in this process.
//!
//! Apart from the rate-limit tables: a permit is a request in flight, so
//! the permits held are bounded by the requests being served, and none may
//! be evicted (that would let one more request in). A key holds state only
//! while one of its permits is held. A permit here needs no lease: its
//! holder is in this process, and gives it back when dropped.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use foldhash::fast::RandomState;
use hashbrown::HashMap;

use crate::concurrency::permit::decision;
use crate::concurrency::{Acquired, ConcurrencyLimit, Permit};

/// The gauge of permits held in memory stores of the process.
const HELD: &str = "limiter_memory_permits_held";
const SHARDS: usize = 16;

pub(super) struct Permits {
    hasher: RandomState,
    shards: [Mutex<HashMap<Box<str>, Vec<u64>>>; SHARDS],
    next_id: AtomicU64,
}

impl Permits {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            hasher: RandomState::default(),
            shards: Default::default(),
            next_id: AtomicU64::new(0),
        })
    }

    /// Takes a permit of `key` if fewer than `limit.max()` are held.
    pub(super) fn acquire(self: &Arc<Self>, key: &str, limit: &ConcurrencyLimit) -> Acquired {
        let mut shard = self.shard(key);
        let held = shard.get(key).map_or(0, Vec::len) as u64;
        if held >= limit.max() {
            return Acquired::Denied(decision(limit, 0, true));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        shard.entry_ref(key).or_default().push(id);
        drop(shard);
        metrics::gauge!(HELD).increment(1.0);
        let (permits, key) = (Arc::clone(self), Box::<str>::from(key));
        let granted = decision(limit, limit.max() - held - 1, false);
        Acquired::Permit(Permit::new(granted, move || permits.release(&key, id)))
    }

    fn release(&self, key: &str, id: u64) {
        let mut shard = self.shard(key);
        let Some(ids) = shard.get_mut(key) else {
            return;
        };
        if let Some(at) = ids.iter().position(|&held| held == id) {
            ids.swap_remove(at);
            metrics::gauge!(HELD).decrement(1.0);
        }
        if ids.is_empty() {
            shard.remove(key);
        }
    }

    /// How many permits of `key` are held.
    pub(super) fn held(&self, key: &str) -> usize {
        self.shard(key).get(key).map_or(0, Vec::len)
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, HashMap<Box<str>, Vec<u64>>> {
        let index = self.hasher.hash_one(key) as usize % SHARDS;
        // Every update is a plain push or removal: poison leaves nothing half-written.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
