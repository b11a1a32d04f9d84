//! Identities blocked for a while: [`Blocks`](super::Blocks) as the memory
//! store keeps it, and the local copy a shared store keeps of its blocks so
//! that each request is answered without a call ([`BlockList`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The most blocks a list holds: past it, a new block is refused (an
/// identity is blocked by an administrator or a penalty, not by a flood).
pub const MAX_BLOCKS: usize = 1_000_000;

/// Blocked keys and when each block ends (µs, on the caller's clock):
/// what a store answers [`Blocks::blocked`](super::Blocks::blocked) from.
/// A request asks it before its rate check, so an empty list costs one
/// atomic load, and the clock is read only when the list holds blocks.
#[derive(Debug, Default)]
pub struct BlockList {
    /// How many entries the map holds (expired ones too, until swept).
    len: AtomicUsize,
    until: Mutex<HashMap<Box<str>, u64>>,
}

impl BlockList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Blocks `key` for `duration` from `now`, replacing a block it has.
    /// Fails when the list is full of live blocks.
    pub fn block(&self, key: &str, duration: Duration, now: u64) -> Result<(), crate::Error> {
        let until = now.saturating_add(duration.as_micros().try_into().unwrap_or(u64::MAX));
        let mut map = self.lock();
        if map.len() >= MAX_BLOCKS && !map.contains_key(key) {
            map.retain(|_, &mut until| until > now);
            if map.len() >= MAX_BLOCKS {
                return Err(crate::Error::Protocol(format!(
                    "{MAX_BLOCKS} identities are blocked already"
                )));
            }
        }
        map.insert(key.into(), until);
        self.len.store(map.len(), Ordering::Release);
        Ok(())
    }

    /// Lifts `key`'s block, if it has one.
    pub fn unblock(&self, key: &str) {
        let mut map = self.lock();
        map.remove(key);
        self.len.store(map.len(), Ordering::Release);
    }

    /// Replaces every block with `blocks` (key, time left from `now`).
    pub fn replace(&self, blocks: impl IntoIterator<Item = (String, Duration)>, now: u64) {
        let mut map = self.lock();
        map.clear();
        for (key, left) in blocks {
            let left: u64 = left.as_micros().try_into().unwrap_or(u64::MAX);
            map.insert(key.into_boxed_str(), now.saturating_add(left));
        }
        self.len.store(map.len(), Ordering::Release);
    }

    /// Whether no key is blocked (expired blocks not yet swept count as
    /// blocked): one atomic load, for callers that skip the lookup.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// How long `key` stays blocked at `now` (read only when the list
    /// holds blocks); `None` when it is not.
    #[inline]
    pub fn blocked(&self, key: &str, now: impl FnOnce() -> u64) -> Option<Duration> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.blocked_at(key, now())
    }

    #[cold]
    fn blocked_at(&self, key: &str, now: u64) -> Option<Duration> {
        let mut map = self.lock();
        let until = *map.get(key)?;
        if until <= now {
            map.remove(key);
            self.len.store(map.len(), Ordering::Release);
            return None;
        }
        Some(Duration::from_micros(until - now))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, u64>> {
        self.until.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_lasts_its_duration_to_the_microsecond() {
        let list = BlockList::new();
        let t0 = 1_000_000_000;
        assert_eq!(list.blocked("k", || t0), None);
        list.block("k", Duration::from_secs(900), t0).unwrap();
        assert_eq!(list.blocked("k", || t0), Some(Duration::from_secs(900)));
        let last = t0 + 899_999_999;
        assert_eq!(list.blocked("k", || last), Some(Duration::from_micros(1)));
        assert_eq!(list.blocked("k", || last + 1), None);
        list.block("k", Duration::from_secs(5), t0).unwrap();
        list.unblock("k");
        assert_eq!(list.blocked("k", || t0), None);
        assert_eq!(list.blocked("other", || t0), None);
    }
}
