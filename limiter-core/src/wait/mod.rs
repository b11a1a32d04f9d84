//! Waiting instead of being denied: a request over the limit waits for its
//! retry time, in turn with the other waiters of its key, for a bounded time.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hashbrown::HashMap;
use tokio::sync::Notify;

use crate::clock::{Clock, SystemClock};
use crate::concurrency::Acquired;
use crate::{Decision, Error, Verdict};

/// How many requests may wait at once unless told otherwise.
pub const DEFAULT_MAX_WAITERS: usize = 1024;

/// An answer a waiting request can wait on: a denial it may outlive, and
/// how to answer a request with another request's denial.
pub trait Waitable: Sized {
    /// The denial this answer is, when waiting may let the request pass
    /// (not for an allowed request, nor for a store that failed closed).
    fn denial(&self) -> Option<&Decision>;

    /// The answer for a request denied with `denial`, which another request
    /// of the same key was given (the request gave up waiting before its
    /// turn came, or found too many waiters).
    fn denied(denial: Decision) -> Self;
}

impl Waitable for Decision {
    fn denial(&self) -> Option<&Decision> {
        (!self.allowed()).then_some(self)
    }

    fn denied(denial: Decision) -> Self {
        denial
    }
}

impl Waitable for Verdict {
    fn denial(&self) -> Option<&Decision> {
        self.decision().filter(|d| !d.allowed())
    }

    /// A denial the store gave earlier: what the deny cache answers.
    fn denied(denial: Decision) -> Self {
        Verdict::Cached(denial)
    }
}

/// A check counted by outcome ([`KeyState::check_refundable`](crate::KeyState::check_refundable)): a denial
/// records nothing, so it has no receipt.
impl Waitable for (Verdict, Option<crate::Receipt>) {
    fn denial(&self) -> Option<&Decision> {
        self.0.denial()
    }

    fn denied(denial: Decision) -> Self {
        (Verdict::denied(denial), None)
    }
}

impl Waitable for Acquired {
    fn denial(&self) -> Option<&Decision> {
        match self {
            Self::Permit(_) => None,
            Self::Denied(decision) => Some(decision),
        }
    }

    fn denied(denial: Decision) -> Self {
        Self::Denied(denial)
    }
}

/// The requests waiting for their retry time, per key, in this process.
///
/// A request over the limit waits until its retry time when that is within
/// its bound, then is checked again, exactly like a new request: if another
/// request took the freed quota meanwhile, it is denied again and waits
/// again, within the same bound. The waiters of a key are served in the
/// order they came: only the first one checks, the others wait for their
/// turn (a later waiter never checks before an earlier one), so a request
/// never skips ahead of the rules or of the requests before it. A request
/// that arrives while its key has waiters joins them instead of checking.
///
/// Bounded: at most [`max_waiters`](Self::with_max_waiters) requests wait at
/// once (by default [`DEFAULT_MAX_WAITERS`]); beyond that, and when the
/// retry time lies beyond a request's bound, the request is answered with
/// its denial at once. A waiter whose bound passes before its turn is
/// answered with its key's latest denial. A waiter whose future is dropped
/// (the client went away) leaves the queue, and the next one takes its
/// turn. Clones share the queues.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Key, ManualClock, MemoryStore, Policy, Rule, Store, Waiters};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let clock = ManualClock::new(Duration::from_secs(1_000));
/// let store = MemoryStore::with_clock(clock.clone());
/// let waiters = Waiters::with_clock(clock.clone());
/// let replies = Policy::sliding_log([Rule::new(1, Duration::from_secs(2))?])?;
/// let laoqian = Key::from("laoqian");
/// assert!(store.check(&laoqian, &replies, 1).await?.allowed());
/// // Over the limit: waits up to 5 s instead of failing.
/// let waiting = waiters.acquire(laoqian.as_str(), Duration::from_secs(5), || {
///     store.check(&laoqian, &replies, 1)
/// });
/// let mover = async {
///     tokio::task::yield_now().await;
///     clock.advance(Duration::from_secs(2)); // its retry time
/// };
/// let (decision, ()) = tokio::join!(waiting, mover);
/// assert!(decision?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Waiters {
    inner: Arc<Inner>,
}

/// Sleeps until the clock shows the given µs.
type Sleeper = Box<dyn Fn(u64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

struct Inner {
    now: Box<dyn Fn() -> u64 + Send + Sync>,
    sleep_until: Sleeper,
    max_waiters: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queues: HashMap<Box<str>, Queue>,
    waiting: usize,
    next_ticket: u64,
}

/// A key's waiters, first in line first.
struct Queue {
    tickets: VecDeque<Ticket>,
    /// The latest denial of the key, and when (µs on the clock).
    latest: (Decision, u64),
}

struct Ticket {
    id: u64,
    /// Notified when the ticket comes to the front.
    turn: Arc<Notify>,
}

impl Waiters {
    /// Waiters sleeping on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// Waiters reading and sleeping on `clock` (a
    /// [`ManualClock`](crate::ManualClock) in tests: a waiter wakes when
    /// the clock is moved past its retry time).
    pub fn with_clock<C: Clock + Clone>(clock: C) -> Self {
        let sleeper = clock.clone();
        Self {
            inner: Arc::new(Inner {
                now: Box::new(move || clock.now_micros()),
                sleep_until: Box::new(move |micros| {
                    let clock = sleeper.clone();
                    Box::pin(async move { clock.sleep_until(micros).await })
                }),
                max_waiters: DEFAULT_MAX_WAITERS,
                state: Mutex::default(),
            }),
        }
    }

    /// At most `max` requests wait at once (0: none ever waits).
    ///
    /// # Panics
    /// When called on a clone whose queues are shared: set the bound first.
    pub fn with_max_waiters(mut self, max: usize) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("the bound is set before the waiters are shared")
            .max_waiters = max;
        self
    }

    /// How many requests wait now.
    pub fn waiting(&self) -> usize {
        self.state().waiting
    }

    /// Decides a request of `key` by `check`, waiting for up to `max_wait`
    /// when it is denied (see the type's docs): answers the first answer
    /// that allows it, or a denial once waiting cannot help.
    ///
    /// `check` runs once at first (unless the key has waiters), then once
    /// each time the request's turn and retry time have come. Its errors
    /// are returned at once. Dropping the future leaves the queue.
    pub async fn acquire<T, F, Fut>(
        &self,
        key: &str,
        max_wait: Duration,
        mut check: F,
    ) -> Result<T, Error>
    where
        T: Waitable,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let deadline = (self.inner.now)().saturating_add(max_wait.as_micros() as u64);
        // A key with waiters is joined, not checked: the first of them goes first.
        let mut place = match self.join_existing(key) {
            Joined::Queued(place) => Some(place),
            Joined::Full(latest) => return Ok(T::denied(latest)),
            Joined::NoQueue => None,
        };
        loop {
            if let Some(place) = &place
                && let Some(latest) = self.wait_turn(place, deadline).await
            {
                return Ok(T::denied(latest));
            }
            let outcome = check().await?;
            let Some(denial) = outcome.denial() else {
                return Ok(outcome);
            };
            let now = (self.inner.now)();
            let retry_at =
                now.saturating_add(denial.retry_after().map_or(0, |r| r.as_micros() as u64));
            let denial = *denial;
            if let Some(place) = &place {
                self.record(place, denial, now);
            }
            if retry_at > deadline {
                return Ok(outcome);
            }
            if place.is_none() {
                match self.join(key, denial, now) {
                    Some(joined) => place = Some(joined),
                    None => return Ok(outcome),
                }
                if !self.is_first(place.as_ref().expect("just joined")) {
                    // Others came first: their turn, then this one's.
                    continue;
                }
            }
            (self.inner.sleep_until)(retry_at).await;
        }
    }

    /// Joins the queue of `key` if it has one.
    fn join_existing(&self, key: &str) -> Joined {
        let mut state = self.state();
        if !state.queues.contains_key(key) {
            return Joined::NoQueue;
        }
        if state.waiting >= self.inner.max_waiters {
            let now = (self.inner.now)();
            let (latest, at) = state.queues[key].latest;
            return Joined::Full(latest.aged(now.saturating_sub(at)));
        }
        Joined::Queued(self.enqueue(&mut state, key))
    }

    /// Joins (or starts) the queue of `key` after a denial; `None` when too
    /// many requests wait already.
    fn join(&self, key: &str, denial: Decision, now: u64) -> Option<Place> {
        let mut state = self.state();
        if state.waiting >= self.inner.max_waiters {
            return None;
        }
        state
            .queues
            .entry_ref(key)
            .and_modify(|queue| queue.latest = (denial, now))
            .or_insert_with(|| Queue {
                tickets: VecDeque::new(),
                latest: (denial, now),
            });
        Some(self.enqueue(&mut state, key))
    }

    fn enqueue(&self, state: &mut State, key: &str) -> Place {
        let id = state.next_ticket;
        state.next_ticket += 1;
        state.waiting += 1;
        let turn = Arc::new(Notify::new());
        let queue = state.queues.get_mut(key).expect("the queue exists");
        queue.tickets.push_back(Ticket {
            id,
            turn: Arc::clone(&turn),
        });
        Place {
            waiters: self.clone(),
            key: key.into(),
            id,
            turn,
        }
    }

    fn is_first(&self, place: &Place) -> bool {
        let state = self.state();
        state.queues[&*place.key].tickets.front().map(|t| t.id) == Some(place.id)
    }

    /// Waits until `place` is first in line; at `deadline` first, answers
    /// the key's latest denial instead.
    async fn wait_turn(&self, place: &Place, deadline: u64) -> Option<Decision> {
        loop {
            let turn = place.turn.notified();
            if self.is_first(place) {
                return None;
            }
            tokio::select! {
                () = turn => {}
                () = (self.inner.sleep_until)(deadline) => {
                    if self.is_first(place) {
                        return None;
                    }
                    let now = (self.inner.now)();
                    let state = self.state();
                    let (latest, at) = state.queues[&*place.key].latest;
                    return Some(latest.aged(now.saturating_sub(at)));
                }
            }
        }
    }

    fn record(&self, place: &Place, denial: Decision, now: u64) {
        let mut state = self.state();
        if let Some(queue) = state.queues.get_mut(&*place.key) {
            queue.latest = (denial, now);
        }
    }

    fn leave(&self, key: &str, id: u64) {
        let mut state = self.state();
        let Some(queue) = state.queues.get_mut(key) else {
            return;
        };
        let Some(at) = queue.tickets.iter().position(|t| t.id == id) else {
            return;
        };
        queue.tickets.remove(at);
        if at == 0
            && let Some(next) = queue.tickets.front()
        {
            next.turn.notify_one();
        }
        if queue.tickets.is_empty() {
            state.queues.remove(key);
        }
        state.waiting -= 1;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update is whole before the lock is released: poison is ignored.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Default for Waiters {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Waiters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiters")
            .field("max_waiters", &self.inner.max_waiters)
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

enum Joined {
    NoQueue,
    Queued(Place),
    /// Too many wait: the key's latest denial, as of now.
    Full(Decision),
}

/// A request's place in its key's queue; leaving the queue when dropped
/// (served, given up or cancelled) hands the turn to the next one.
struct Place {
    waiters: Waiters,
    key: Box<str>,
    id: u64,
    turn: Arc<Notify>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.waiters.leave(&self.key, self.id);
    }
}

#[cfg(test)]
mod tests;
