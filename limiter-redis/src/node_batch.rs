//! Batching across keys: while a check's call is in flight to Redis, the
//! checks of other keys wait, and go together in the next call, which
//! decides each key in turn with the algorithm's own `decide`
//! (`scripts/keys.lua`), as a call of its own at the same time would.
//! Redis then pays what every call costs (reading and parsing it, finding
//! the script, setting up Lua, the server's time, the reply) once a batch,
//! not once a key. Coalescing (`coalesce.rs`) comes first: a key's further
//! checks wait for its own call, so what waits here is each key's first.
//!
//! As for coalescing, nothing waits when nothing is in flight: a lone
//! check sends its own call at once. Checks arriving meanwhile queue; when
//! that call ends, a task takes the queue and sends it, one call for each
//! policy, cost and time (tests only) among them (a longer queue than
//! [`MAX_KEYS`] in several calls sent at once), and again while checks keep
//! arriving. Each caller keeps its deadline; one that gave up, or whose
//! deadline passed while it waited, is left out and not counted; one whose
//! deadline passes once its call is sent counts, as a call of its own
//! abandoned in flight would. A call that fails answers each of its
//! callers with its error.
//!
//! On a Cluster, the queue is per node: a call goes to one node and
//! checks keys of any of its slots, which it names among its arguments (a
//! Cluster runs a script on declared keys of one slot only, which the keys
//! of distinct identities seldom share). A key whose slot has moved is
//! refused by that node before anything of it is written, and checked
//! again in a call of its own. While the slots' owners are not known yet,
//! every check has a call of its own.

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::RedisStore;
use super::check;
use super::link::lock;
use super::queue::{self, Queued, Waiter};
use super::store::Backend;
use limiter_core::{Decision, Error, Policy};

/// The most keys one call decides: the script holds Redis while it runs
/// (several microseconds a key).
const MAX_KEYS: usize = 128;

/// A check of `key`: in a call of its own when none is in flight to its
/// node, else queued for the next call.
pub(crate) async fn decide(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<Decision, Error> {
    let Some(node) = node_of(store, key) else {
        return check::decide_one(store, key, policy, cost, now).await;
    };
    let queued = {
        let mut nodes = lock(&store.inner.gathering.nodes);
        let state = nodes.entry(node).or_default();
        if state.busy {
            let (answer, receiver) = oneshot::channel();
            state.waiting.push(Queued {
                key: key.into(),
                policy: policy.clone(),
                now,
                waiter: Waiter {
                    cost,
                    deadline: store.deadline(),
                    answer,
                },
            });
            Some((receiver, !state.in_task))
        } else {
            state.busy = true;
            None
        }
    };
    match queued {
        Some((receiver, own_timer)) => {
            queue::answer_of(receiver, own_timer, store.inner.config.response_timeout).await
        }
        None => {
            // Hands the queue over when this call ends or is dropped.
            let _turn = Turn { store, node };
            check::decide_one(store, key, policy, cost, now).await
        }
    }
}

/// The node whose queue `key`'s check joins: 0, the store's one Redis; on
/// a Cluster, the failure domain of the node serving its slot, `None`
/// while the slots' owners are not known.
pub(crate) fn node_of(store: &RedisStore, key: &str) -> Option<u64> {
    match &store.inner.backend {
        Backend::Primary(_) => Some(0),
        Backend::Cluster(cluster) => Some(cluster.slots.domain(key)).filter(|&node| node != 0),
    }
}

/// A check's own call in flight. When it ends (or its future is dropped),
/// the checks that queued meanwhile go, in a task.
struct Turn<'a> {
    store: &'a RedisStore,
    node: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let Some(waiting) = next(self.store, self.node) else {
            return;
        };
        let batches = Batches {
            store: self.store.clone(),
            node: self.node,
            ended: false,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(batches.run(waiting))),
            // No runtime (it is shutting down): the waiting checks fail.
            Err(_) => drop((batches, waiting)),
        }
    }
}

/// The checks queued during the call that just ended, which the batches'
/// task takes over; none (and the next check sends its own call) when none
/// queued.
fn next(store: &RedisStore, node: u64) -> Option<Vec<Queued>> {
    let mut nodes = lock(&store.inner.gathering.nodes);
    let state = nodes.entry(node).or_default();
    if state.waiting.is_empty() {
        // An idle node holds no entry.
        nodes.remove(&node);
        return None;
    }
    state.in_task = true;
    Some(std::mem::take(&mut state.waiting))
}

/// The task sending the queued checks, call after call, until none queued
/// during the last one.
struct Batches {
    store: RedisStore,
    node: u64,
    /// The queue was handed back (`next` found it empty).
    ended: bool,
}

impl Batches {
    async fn run(mut self, mut waiting: Vec<Queued>) {
        loop {
            // Callers that gave up are left out: nothing of theirs is sent.
            waiting.retain(|queued| !queued.waiter.answer.is_closed());
            // So are callers whose deadline passed while the call before
            // theirs ran: they time out.
            let now = Instant::now();
            let timeout = self.store.inner.config.response_timeout;
            for late in waiting.extract_if(.., |queued| queued.waiter.deadline <= now) {
                let _ = late.waiter.answer.send(Err(Error::Timeout(timeout)));
            }
            let mut batches = Vec::new();
            for mut group in groups(waiting) {
                while !group.is_empty() {
                    let rest = group.split_off(group.len().min(MAX_KEYS));
                    batches.push(std::mem::replace(&mut group, rest));
                }
            }
            // One batch (the usual case) is awaited where it is made: a
            // call's future is kilobytes, which a list would copy.
            if batches.len() == 1 {
                self.send(batches.remove(0)).await;
            } else {
                let calls = batches.into_iter().map(|batch| self.send(batch));
                futures_util::future::join_all(calls).await;
            }
            match next(&self.store, self.node) {
                Some(more) => waiting = more,
                None => {
                    self.ended = true;
                    return;
                }
            }
        }
    }

    /// One call deciding `batch` (checks of one policy, cost and time),
    /// bounded by the latest of its callers' deadlines.
    async fn send(&self, batch: Vec<Queued>) {
        let Some(last) = batch.iter().map(|queued| queued.waiter.deadline).max() else {
            return;
        };
        let (policy, cost, now) = (batch[0].policy.clone(), batch[0].waiter.cost, batch[0].now);
        let mut keys = Vec::with_capacity(batch.len());
        let mut answers = Vec::with_capacity(batch.len());
        for queued in batch {
            keys.push(queued.key);
            answers.push((queued.waiter.deadline, queued.waiter.answer));
        }
        let keys: Vec<&str> = keys.iter().map(|key| &**key).collect();
        // Made inside the block, so that the call's future is not copied
        // into it.
        let call = async {
            let store = &self.store;
            check::decide_keys(store, self.node, &keys, &policy, cost, now, last).await
        };
        let timeout = self.store.inner.config.response_timeout;
        queue::answer_by_deadlines(call, answers, timeout).await;
    }
}

impl Drop for Batches {
    /// The task was dropped before it ended (the runtime shut down): the
    /// queue goes, and its checks fail (their answers are dropped).
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        lock(&self.store.inner.gathering.nodes).remove(&self.node);
    }
}

/// The queued checks by policy, cost and time, each group in the order its
/// checks came.
fn groups(waiting: Vec<Queued>) -> Vec<Vec<Queued>> {
    let mut groups: Vec<Vec<Queued>> = Vec::new();
    for queued in waiting {
        let same = |group: &&mut Vec<Queued>| {
            let first = &group[0];
            first.waiter.cost == queued.waiter.cost
                && first.now == queued.now
                && first.policy == queued.policy
        };
        match groups.iter_mut().find(same) {
            Some(group) => group.push(queued),
            None => groups.push(vec![queued]),
        }
    }
    groups
}
