//! The local deny cache: once the store denies a key until `T`, this instance
//! answers that key's denials by itself until `T`, without a store call.
//!
//! Sound for all six algorithms: their state only moves toward "more denied"
//! through other requests (entries are added, counters grow, tokens are
//! taken, the TAT moves later); only time frees quota, and `retry_after` is
//! computed from time alone. So a denial until `T` cannot end before `T`
//! while the store keeps its state (a flushed or failed-over Redis that lost
//! the key is the exception, see docs/operations.md). A cheaper
//! request may pass earlier, so only requests of at least the denied cost are
//! answered from the cache.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use crate::Decision;

const SHARDS: usize = 16;

/// How many denials one instance remembers unless told otherwise.
pub const DEFAULT_DENY_CACHE_CAPACITY: usize = 16_384;

struct Denial {
    /// When the denial ends, by the local clock (µs).
    until: u64,
    recorded_at: u64,
    cost: u64,
    decision: Decision,
}

type Shard = HashMap<Box<str>, Denial>;

pub(crate) struct DenyCache {
    /// Seeded per cache, so nobody can choose keys that collide.
    hasher: foldhash::fast::RandomState,
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
}

impl DenyCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS),
        }
    }

    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % SHARDS;
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached denial of `key` for a request of `cost` at `now`, aged to `now`.
    pub(crate) fn get(&self, key: &str, cost: u64, now: u64) -> Option<Decision> {
        let mut shard = self.shard(key);
        let denial = shard.get(key)?;
        if denial.until <= now {
            shard.remove(key);
            return None;
        }
        // A request whose time was read before another recorded this
        // denial asks with an earlier `now`: the denial is as fresh as made.
        let age = now.saturating_sub(denial.recorded_at);
        (cost >= denial.cost).then(|| denial.decision.aged(age))
    }

    /// Remembers a denial made at `now`. When the cache is full of live
    /// denials, the new one is not remembered (the store still answers).
    pub(crate) fn insert(&self, key: &str, cost: u64, now: u64, decision: Decision) {
        let Some(retry_after) = decision.retry_after() else {
            return;
        };
        let mut shard = self.shard(key);
        if shard.len() >= self.per_shard && !shard.contains_key(key) {
            shard.retain(|_, d| d.until > now);
            if shard.len() >= self.per_shard {
                return;
            }
        }
        shard.insert(
            key.into(),
            Denial {
                until: now + retry_after.as_micros() as u64,
                recorded_at: now,
                cost,
                decision,
            },
        );
    }

    /// Forgets the denial of `key` (its state was reset).
    pub(crate) fn remove(&self, key: &str) {
        self.shard(key).remove(key);
    }

    /// Forgets every denial.
    pub(crate) fn clear(&self) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{MemoryStore, Policy, Rule};

    fn denial_at(now: u64) -> Decision {
        let store = MemoryStore::new();
        let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(10)).unwrap()]).unwrap();
        let key = crate::Key::from("k");
        store.check_at(&key, &policy, 1, now).unwrap();
        store.check_at(&key, &policy, 1, now).unwrap()
    }

    #[test]
    fn answers_until_the_denial_ends_and_ages_the_times() {
        let cache = DenyCache::new(100);
        let denied = denial_at(1_000_000);
        cache.insert("k", 1, 1_000_000, denied);
        let later = cache.get("k", 1, 4_000_000).expect("still denied");
        assert_eq!(later.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(later.reset_after(), Duration::from_secs(7));
        assert!(cache.get("k", 1, 10_999_999).is_some());
        assert!(cache.get("k", 1, 11_000_000).is_none());
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_request_timed_before_the_denial_was_recorded_finds_it_whole() {
        let cache = DenyCache::new(100);
        let denied = denial_at(1_000_000);
        cache.insert("k", 1, 1_000_000, denied);
        // Another thread read its clock a little earlier.
        let earlier = cache.get("k", 1, 999_000).expect("denied");
        assert_eq!(earlier.retry_after(), denied.retry_after());
    }

    #[test]
    fn cheaper_requests_and_full_caches_go_to_the_store() {
        let cache = DenyCache::new(SHARDS);
        cache.insert("k", 3, 0, denial_at(0));
        assert!(cache.get("k", 2, 1).is_none());
        assert!(cache.get("k", 3, 1).is_some());
        for i in 0..10 * SHARDS {
            cache.insert(&format!("other{i}"), 1, 0, denial_at(0));
        }
        assert!(cache.len() <= SHARDS);
    }
}
