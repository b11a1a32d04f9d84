//! Coalescing: while a call for a key is in flight, the checks of that key
//! under the same policy from this process wait, and go together in the
//! next call, which decides each in turn as if they had arrived one after
//! another (see `batch.rs`). A hot key then costs Redis one call per round
//! trip instead of one per check, with the very same decisions.
//!
//! The first check of a key runs its own call (the algorithm's own script,
//! as without coalescing). Checks arriving meanwhile queue; when that call
//! ends, a task takes the queue and sends it as one batch, and again while
//! checks keep arriving. So no check waits for more than one call before
//! its own (a queue longer than [`MAX_BATCH`] goes in several calls sent
//! at once). Each caller keeps its own deadline, the response timeout from
//! when it queued, and is answered with a timeout at it. A caller whose
//! deadline passed while the call before its batch ran is left out of the
//! batch and not counted (so is a caller whose future was dropped); one
//! whose deadline passes after its batch was sent counts, as a single call
//! abandoned in flight would. While the batches' task runs the calls, it
//! keeps the deadlines with one timer per call, not one per caller (a
//! timer per caller was a sixth of a hot key's work in the client); only
//! the callers queued behind a first check's own call, which its caller
//! might stop polling, keep timers of their own.

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::link::lock;
use super::queue::{self, Queue, Waiter};
use super::subscription;
use super::{RedisStore, check, node_batch};
use limiter_core::Decision;
use limiter_core::Error;
use limiter_core::Policy;

/// The most requests one call decides: a batch script holds Redis while it
/// runs (a few microseconds a request).
const MAX_BATCH: usize = 512;

/// A check: it joins the call in flight for its key and policy, or makes
/// one.
pub(super) async fn check(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<Decision, Error> {
    let pending = &store.inner.pending;
    let joined = {
        let mut queues = lock(&pending.queues);
        let same = |queue: &&mut Queue| queue.policy == *policy && queue.now == now;
        match queues
            .get_mut(key)
            .and_then(|list| list.iter_mut().find(same))
        {
            Some(queue) => {
                let (answer, receiver) = oneshot::channel();
                queue.waiting.push(Waiter {
                    cost,
                    deadline: store.deadline(),
                    answer,
                });
                Err((receiver, !queue.in_task))
            }
            None => {
                let id = pending.next_id.fetch_add(1, Ordering::Relaxed);
                queues.entry(key.into()).or_default().push(Queue {
                    id,
                    policy: policy.clone(),
                    now,
                    waiting: Vec::new(),
                    in_task: false,
                });
                Ok(id)
            }
        }
    };
    match joined {
        Ok(id) => {
            // Hands the queue over when this call ends or is dropped.
            let _turn = Turn {
                store,
                key,
                policy,
                now,
                id,
            };
            node_batch::decide(store, key, policy, cost, now).await
        }
        Err((receiver, own_timer)) => {
            queue::answer_of(receiver, own_timer, store.inner.config.response_timeout).await
        }
    }
}

/// The first check's call in flight. When it ends (or its future is
/// dropped), the checks that queued meanwhile go in a batch, in a task.
struct Turn<'a> {
    store: &'a RedisStore,
    key: &'a str,
    policy: &'a Policy,
    now: Option<u64>,
    id: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let Some(waiting) = next(self.store, self.key, self.id) else {
            return;
        };
        let batches = Batches {
            store: self.store.clone(),
            key: self.key.into(),
            policy: self.policy.clone(),
            now: self.now,
            id: self.id,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(batches.run(waiting))),
            // No runtime (it is shutting down): the waiting checks fail.
            Err(_) => drop((batches, waiting)),
        }
    }
}

/// The task sending a key's queued checks, batch after batch, until none
/// queued during the last one.
struct Batches {
    store: RedisStore,
    key: Box<str>,
    policy: Policy,
    now: Option<u64>,
    id: u64,
}

impl Batches {
    async fn run(self, mut waiting: Vec<Waiter>) {
        loop {
            // Callers that gave up are left out: nothing of theirs is sent.
            waiting.retain(|waiter| !waiter.answer.is_closed());
            // So are callers whose deadline passed while the call before
            // theirs ran: they time out.
            let now = Instant::now();
            let timeout = self.store.inner.config.response_timeout;
            for late in waiting.extract_if(.., |waiter| waiter.deadline <= now) {
                let _ = late.answer.send(Err(Error::Timeout(timeout)));
            }
            // Larger batches go in several calls at once (they run one
            // after another in Redis), so no script holds Redis for long.
            // One batch (the usual case) is awaited where it is made: a
            // call's future is kilobytes, which a list would copy.
            if waiting.len() <= MAX_BATCH {
                self.send(std::mem::take(&mut waiting)).await;
            } else {
                let mut batches = Vec::new();
                while !waiting.is_empty() {
                    let rest = waiting.split_off(waiting.len().min(MAX_BATCH));
                    batches.push(std::mem::replace(&mut waiting, rest));
                }
                let calls = batches.into_iter().map(|batch| self.send(batch));
                futures_util::future::join_all(calls).await;
            }
            match next(&self.store, &self.key, self.id) {
                Some(more) => waiting = more,
                None => return,
            }
        }
    }

    /// One call deciding `batch`, bounded by the latest of its callers'
    /// deadlines; each caller gets its decision, the call's error, or a
    /// timeout at its own deadline, once. One timer waits for the next
    /// deadline (none comes before the call ends, unless Redis is slow).
    async fn send(&self, batch: Vec<Waiter>) {
        let costs: Vec<u64> = batch.iter().map(|waiter| waiter.cost).collect();
        let Some(last) = batch.iter().map(|waiter| waiter.deadline).max() else {
            return;
        };
        let answers = batch
            .into_iter()
            .map(|waiter| (waiter.deadline, waiter.answer))
            .collect();
        // Made inside the block, so that the call's future is not copied
        // into it.
        let call = async {
            let (store, key, policy) = (&self.store, &self.key, &self.policy);
            let decided = check::decide_batch(store, key, policy, &costs, self.now, last).await?;
            Ok(decided.into_iter().map(Ok).collect())
        };
        queue::answer_by_deadlines(call, answers, self.store.inner.config.response_timeout).await;
    }
}

impl Drop for Batches {
    /// The task was dropped before it ended (the runtime shut down): the
    /// queue goes, and its checks fail (their answers are dropped).
    fn drop(&mut self) {
        let mut queues = lock(&self.store.inner.pending.queues);
        if let Some(list) = queues.get_mut(&*self.key) {
            list.retain(|queue| queue.id != self.id);
            if list.is_empty() {
                queues.remove(&*self.key);
            }
        }
    }
}

/// The checks queued for call `id` of `key`, which the batches' task takes
/// over; none (and the queue is removed, so the next check makes a call of
/// its own) when none queued.
fn next(store: &RedisStore, key: &str, id: u64) -> Option<Vec<Waiter>> {
    let mut queues = lock(&store.inner.pending.queues);
    let list = queues.get_mut(key)?;
    let index = list.iter().position(|queue| queue.id == id)?;
    if list[index].waiting.is_empty() {
        list.swap_remove(index);
        if list.is_empty() {
            queues.remove(key);
        }
        return None;
    }
    list[index].in_task = true;
    Some(std::mem::take(&mut list[index].waiting))
}

/// One check: coalesced with the checks of the same key and policy in
/// flight (unless turned off), else a call of its own.
pub(crate) async fn run(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<Decision, Error> {
    policy.validate_cost(cost)?;
    subscription::subscribe(store);
    if store.inner.config.coalesce {
        return check(store, key, policy, cost, now).await;
    }
    check::decide_one(store, key, policy, cost, now).await
}
