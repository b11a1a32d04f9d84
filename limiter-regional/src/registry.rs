//! Which asks wait or run: one per key and window, at most
//! `ask_concurrency` at once and `max_pending_asks` waiting.
//!
//! A key that asks again while its ask runs is served by one more run
//! after it. An ask whose window has ended by the time its turn comes is
//! dropped, not run, so a backlog cannot hold up the windows still
//! counting. An ask whose task is dropped (the runtime shutting down)
//! leaves nothing behind but its mark in Redis, which lapses after
//! [`ask_timeout`](crate::RegionalConfig::ask_timeout).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{Semaphore, watch};

use super::ask::ask;
use super::stats::bump;
use super::store::Inner;
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
    fn is_over(&self) -> bool {
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
    max_pending: usize,
    permits: Semaphore,
    /// How many keys wait or run, for [`idle`](Self::idle).
    waiting: watch::Sender<usize>,
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

    /// Starts an ask for `request`'s key and window, or has the running one
    /// run once more.
    pub(crate) fn request(inner: &Arc<Inner>, request: AskRequest) {
        let registry = &inner.registry;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            dropped(inner, "no Tokio runtime to ask on");
            return;
        };
        let id = (request.key.clone(), request.start);
        let mut pending = registry.lock();
        if let Some(again) = pending.get_mut(&id) {
            *again = Some(request);
            return;
        }
        if pending.len() >= registry.max_pending {
            drop(pending);
            dropped(inner, "too many keys wait to ask");
            return;
        }
        pending.insert(id.clone(), None);
        registry.waiting.send_replace(pending.len());
        drop(pending);
        let entry = Entry {
            inner: Arc::clone(inner),
            id,
            armed: true,
        };
        runtime.spawn(entry.run(request));
    }

    pub(crate) async fn idle(&self) {
        let mut waiting = self.waiting.subscribe();
        // The sender lives as long as `self`: the wait cannot fail.
        let _ = waiting.wait_for(|&n| n == 0).await;
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn remove(&self, id: &(Box<str>, u64)) {
        let mut pending = self.lock();
        pending.remove(id);
        self.waiting.send_replace(pending.len());
    }
}

fn dropped(inner: &Inner, why: &str) {
    bump(&inner.stats.asks_dropped);
    metrics::counter!("limiter_region_asks_dropped_total").increment(1);
    tracing::warn!(
        why,
        "regional ask dropped; the key asks again at a later check"
    );
}

/// One key and window's place in the registry, given back when its task
/// ends or is dropped.
struct Entry {
    inner: Arc<Inner>,
    id: (Box<str>, u64),
    armed: bool,
}

impl Entry {
    async fn run(mut self, mut request: AskRequest) {
        loop {
            {
                // The semaphore is never closed.
                let _permit = self.inner.registry.permits.acquire().await;
                if request.is_over() {
                    // Behind a backlog: running it would only delay the
                    // asks of windows that still count.
                    bump(&self.inner.stats.asks_expired);
                    metrics::counter!("limiter_region_asks_expired_total").increment(1);
                } else {
                    ask(&self.inner, &request).await;
                }
            }
            // Whether to run again and leaving the registry are one step,
            // so a crossing in between is never lost.
            let mut pending = self.inner.registry.lock();
            match pending.get_mut(&self.id).and_then(Option::take) {
                Some(next) => request = next,
                None => {
                    pending.remove(&self.id);
                    self.inner.registry.waiting.send_replace(pending.len());
                    self.armed = false;
                    return;
                }
            }
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.armed {
            self.inner.registry.remove(&self.id);
        }
    }
}
