//! Which asks wait or run (the runs are `ask.rs`'s): one per key and window, at most
//! `ask_concurrency` at once and `max_pending_asks` waiting.
//!
//! A key that asks again while its ask runs is served by one more run
//! after it. An ask whose window has ended by the time its turn comes is
//! dropped, not run, so a backlog cannot hold up the windows still
//! counting. An ask whose task is dropped (the runtime shutting down)
//! leaves nothing behind but its mark in Redis, which lapses after
//! [`ask_timeout`](crate::RegionalConfig::ask_timeout).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{Semaphore, watch};

use limiter_core::Rule;

/// A key short of its demand: which key and window to ask for, as the
/// check saw it.
#[derive(Debug)]
pub(crate) struct AskRequest {
    pub(crate) key: Box<str>,
    pub(crate) rule: Rule,
    pub(crate) sliding: bool,
    /// The window's start and the check's time (the local Redis's clock).
    pub(crate) start: u64,
    pub(crate) now: u64,
    /// How much to ask for, and this region's count in the window.
    pub(crate) want: u64,
    pub(crate) count: u64,
    /// The check's time was given by a test: the scripts take it too.
    pub(crate) injected_time: bool,
    /// When the check asked (this process's clock).
    pub(crate) asked: Instant,
}

impl AskRequest {
    /// Whether the window has ended: what an ask would get for it no
    /// longer decides anything (the next window's checks ask for their own).
    pub(crate) fn is_over(&self) -> bool {
        // A test's time does not pass by itself.
        !self.injected_time
            && self
                .now
                .saturating_add(self.asked.elapsed().as_micros() as u64)
                >= self.start.saturating_add(self.rule.window_us())
    }
}

/// Each waiting or running key and window, with the request to run again
/// when the key asked again meanwhile.
type Pending = HashMap<(Box<str>, u64), Option<AskRequest>>;

pub(crate) struct Registry {
    pending: Mutex<Pending>,
    pub(crate) max_pending: usize,
    pub(crate) permits: Semaphore,
    /// How many keys wait or run, for [`idle`](Self::idle).
    pub(crate) waiting: watch::Sender<usize>,
}

impl Registry {
    pub(crate) fn new(concurrency: usize, max_pending: usize) -> Self {
        Self {
            pending: Mutex::new(HashMap::new()),
            max_pending,
            permits: Semaphore::new(concurrency),
            waiting: watch::Sender::new(0),
        }
    }

    pub(crate) async fn idle(&self) {
        let mut waiting = self.waiting.subscribe();
        // The sender lives as long as `self`: the wait cannot fail.
        let _ = waiting.wait_for(|&n| n == 0).await;
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn remove(&self, id: &(Box<str>, u64)) {
        let mut pending = self.lock();
        pending.remove(id);
        self.waiting.send_replace(pending.len());
    }
}
