//! Quota leasing: an instance takes up to `max` permits of a hot key in one
//! call and hands them out locally until they are spent or the lease ends.
//!
//! Why it never admits more than the policy allows, in any window: the
//! store records every leased permit as used at the lease's end (the
//! sliding log) or inside the window that ends no sooner than the lease
//! (the fixed window), and this instance uses a permit only before the
//! lease's end, measured from before the call was sent. So each admission
//! is counted no earlier than it happened and for at least as long, and
//! any window holds no more admissions than the store let through.
//!
//! A lease is fetched in a task of its own: a caller that gives up (its
//! future dropped at any await) leaves the lease to the next caller, and
//! the same task gives back what was not used when the lease ends.

use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashMap;
use tokio::sync::Notify;

use crate::store::Store;
use crate::{Decision, Error, Key, Policy, Verdict};

use super::Lease;
use super::grant::{LeaseGrant, LeaseRequest};
use super::state::{Instance, MAX_TRACKED_KEYS, SweepGate};

/// Fetches a request waits for before it asks the store directly.
const MAX_ROUNDS: usize = 16;

/// Each key's lease state.
#[derive(Default)]
pub(crate) struct Leases {
    keys: Mutex<HashMap<Box<str>, Arc<Mutex<KeyState>>, foldhash::fast::RandomState>>,
    sweep: SweepGate,
}

impl Leases {
    pub(crate) fn len(&self) -> usize {
        lock(&self.keys).len()
    }

    /// Forgets the key's lease (its state was reset): the next request
    /// starts afresh. A fetch under way installs its lease in the state it
    /// began with, which no request sees any more; the lease's permits go
    /// back when it ends.
    /// Forgets every key (notices of resets may have been missed).
    pub(crate) fn clear(&self) {
        lock(&self.keys).clear();
    }

    pub(crate) fn forget(&self, key: &str) {
        lock(&self.keys).remove(key);
    }

    /// The key's state; `None` when the table is full of keys in use.
    fn state(&self, key: &str, now: u64, length: u64) -> Option<Arc<Mutex<KeyState>>> {
        let mut keys = lock(&self.keys);
        if let Some(state) = keys.get(key) {
            return Some(Arc::clone(state));
        }
        if keys.len() >= MAX_TRACKED_KEYS {
            // Keys without a lease, a fetch or a request for a lease's
            // length are forgotten: their rate reads as cold anyway.
            if self.sweep.due(now) {
                keys.retain(|_, state| !lock(state).idle(now, length));
            }
            if keys.len() >= MAX_TRACKED_KEYS {
                return None;
            }
        }
        let state = Arc::new(Mutex::new(KeyState::default()));
        keys.insert(key.into(), Arc::clone(&state));
        Some(state)
    }
}

#[derive(Default)]
struct KeyState {
    held: Option<LocalLease>,
    /// Wakes the callers waiting for the lease being fetched.
    fetching: Option<Arc<Notify>>,
    /// The permits the callers waiting for that fetch need: the next lease
    /// is at least as large.
    waiting: u64,
    /// The store denied a lease: answered locally until then.
    denied: Option<(u64, Decision)>,
    /// Taking a lease failed: requests go to the store directly until then
    /// (a guarded store then applies its failure policy).
    direct_until: u64,
    rate: Rate,
}

impl KeyState {
    fn idle(&self, now: u64, length: u64) -> bool {
        self.held.is_none()
            && self.fetching.is_none()
            && now.saturating_sub(self.rate.start) >= 2 * length
    }
}

/// Requests (in permits) per lease length: the current period's and the
/// last whole one's.
#[derive(Default)]
struct Rate {
    start: u64,
    current: u64,
    previous: u64,
}

impl Rate {
    fn add(&mut self, now: u64, cost: u64, length: u64) {
        let elapsed = now.saturating_sub(self.start);
        if elapsed >= length {
            self.previous = if elapsed < 2 * length {
                self.current
            } else {
                0
            };
            self.current = 0;
            self.start = now;
        }
        self.current += cost;
    }

    /// The permits a lease should hold: what the key used in a lease's length.
    fn expected(&self) -> u64 {
        self.previous.max(self.current)
    }
}

/// A lease this instance holds.
struct LocalLease {
    grant: LeaseGrant,
    used: u64,
    /// When it ends on this instance's clock (the call's start plus its length).
    end: u64,
}

enum Step {
    Served(Decision),
    Denied(Decision),
    Direct,
    Wait(Arc<Notify>),
    Fetch(Arc<Notify>, LeaseRequest, u64),
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn check<S: Store>(
    hot: &Arc<Instance>,
    leases: &Leases,
    store: &Arc<S>,
    key: &Key,
    policy: &Policy,
    lease: Lease,
    cost: u64,
) -> Result<Verdict, Error> {
    policy.validate_cost(cost)?;
    let (length, text) = (lease.ttl_us(), key.as_str());
    let Some(state) = leases.state(text, hot.clock.now(), length) else {
        return direct(hot, store, key, policy, cost).await;
    };
    // Each fetch serves some waiters (or denies them all); one that lost
    // to the others this many times asks the store directly.
    for round in 0..MAX_ROUNDS {
        let now = hot.clock.now();
        let (step, ended) = {
            let mut state = lock(&state);
            if round == 0 {
                state.rate.add(now, cost, length);
            }
            next_step(hot, &mut state, now, lease, cost)
        };
        if let Some(ended) = ended {
            let expired = now >= ended.end;
            spawn_return(store, text, policy, ended, expired);
        }
        let notify = match step {
            Step::Served(decision) => return Ok(Verdict::Store(decision)),
            Step::Denied(decision) => return Ok(Verdict::Cached(decision)),
            Step::Direct => break,
            Step::Wait(notify) => notify,
            Step::Fetch(notify, request, sent) => {
                let waiting = Arc::clone(&notify).notified_owned();
                let mut waiting = std::pin::pin!(waiting);
                waiting.as_mut().enable();
                spawn_fetch(hot, store, text, policy, &state, notify, request, sent);
                waiting.await;
                continue;
            }
        };
        let waiting = Arc::clone(&notify).notified_owned();
        let mut waiting = std::pin::pin!(waiting);
        waiting.as_mut().enable();
        // That fetch may have ended between the step and `enable` (and
        // another begun, whose end this would not hear of).
        let still_fetching = lock(&state)
            .fetching
            .as_ref()
            .is_some_and(|fetching| Arc::ptr_eq(fetching, &notify));
        if still_fetching {
            waiting.await;
        }
    }
    direct(hot, store, key, policy, cost).await
}

/// What to do with the key's state as it is; also the lease that ended,
/// whose unused permits go back.
fn next_step(
    hot: &Arc<Instance>,
    state: &mut KeyState,
    now: u64,
    lease: Lease,
    cost: u64,
) -> (Step, Option<LocalLease>) {
    let mut ended = None;
    if let Some(held) = &mut state.held {
        if now < held.end && held.grant.granted - held.used >= cost {
            held.used += cost;
            return (Step::Served(held.grant.decision), None);
        }
        // Spent, too small for this request, or over: a new one is due.
        ended = state.held.take();
    }
    if let Some((until, decision)) = state.denied {
        if now < until {
            return (Step::Denied(decision), ended);
        }
        state.denied = None;
    }
    if let Some(notify) = &state.fetching {
        state.waiting += cost;
        return (Step::Wait(Arc::clone(notify)), ended);
    }
    let want = state
        .rate
        .expected()
        .max(state.waiting + cost)
        .min(lease.max());
    state.waiting = 0;
    // A cold key (fewer than two requests a lease) goes to the store directly.
    if now < state.direct_until || want < 2 * cost {
        return (Step::Direct, ended);
    }
    let notify = Arc::new(Notify::new());
    state.fetching = Some(Arc::clone(&notify));
    let request = LeaseRequest {
        need: cost,
        want,
        length_us: lease.ttl_us(),
        id: hot.next_id(),
        at: hot.store_time.then_some(now),
    };
    (Step::Fetch(notify, request, now), ended)
}

/// A plain check through the lease script (a lease used at once), so that
/// the key's state stays the lease script's; a guarded store applies its
/// failure policy when the store fails.
async fn direct<S: Store>(
    hot: &Arc<Instance>,
    store: &Arc<S>,
    key: &Key,
    policy: &Policy,
    cost: u64,
) -> Result<Verdict, Error> {
    let request = LeaseRequest {
        need: cost,
        want: cost,
        length_us: 0,
        id: hot.next_id(),
        at: hot.store_time.then(|| hot.clock.now()),
    };
    match take(&**store, key.as_str(), policy, &request).await {
        Ok(grant) => Ok(Verdict::Store(grant.decision)),
        Err(Error::Config(error)) => Err(error.into()),
        Err(_) if store.is_guarded() => super::verdict_of(&**store, key, policy, cost).await,
        Err(error) => Err(error),
    }
}

#[allow(clippy::too_many_arguments)]
fn spawn_fetch<S: Store>(
    hot: &Arc<Instance>,
    store: &Arc<S>,
    key: &str,
    policy: &Policy,
    state: &Arc<Mutex<KeyState>>,
    notify: Arc<Notify>,
    request: LeaseRequest,
    sent: u64,
) {
    let (hot, store, state) = (Arc::clone(hot), Arc::clone(store), Arc::clone(state));
    let (key, policy) = (key.to_owned(), policy.clone());
    tokio::spawn(async move {
        let outcome = take(&*store, &key, &policy, &request).await;
        let clock = &hot.clock;
        let end = {
            let mut state = lock(&state);
            state.fetching = None;
            state.waiting = 0;
            let end = match outcome {
                Ok(grant) if grant.granted > 0 => {
                    metrics::counter!("limiter_leases_granted_total").increment(1);
                    metrics::counter!("limiter_lease_permits_granted_total")
                        .increment(grant.granted);
                    let end = sent + grant.length_us;
                    let id = grant.id;
                    state.held = Some(LocalLease {
                        grant,
                        used: 0,
                        end,
                    });
                    Some((end, id))
                }
                Ok(grant) => {
                    // Denied: answered here until the retry time, at most a
                    // lease's length (permits may come back sooner).
                    let wait = grant
                        .decision
                        .retry_after()
                        .map_or(0, |d| d.as_micros() as u64)
                        .min(request.length_us);
                    state.denied = Some((sent + wait, grant.decision));
                    None
                }
                Err(error) => {
                    tracing::warn!(%error, "taking a lease failed: checking directly for a lease's length");
                    state.direct_until = clock.now() + request.length_us;
                    None
                }
            };
            notify.notify_waiters();
            end
        };
        let Some((end, id)) = end else { return };
        // The lease's end: whatever is left of it goes back.
        clock.sleep_until(end).await;
        let ended = {
            let mut state = lock(&state);
            match &state.held {
                Some(held) if held.grant.id == id => state.held.take(),
                _ => None,
            }
        };
        if let Some(ended) = ended {
            give_back(&*store, &key, &policy, ended, true).await;
        }
    });
}

fn spawn_return<S: Store>(
    store: &Arc<S>,
    key: &str,
    policy: &Policy,
    ended: LocalLease,
    expired: bool,
) {
    let store = Arc::clone(store);
    let (key, policy) = (key.to_owned(), policy.clone());
    tokio::spawn(async move { give_back(&*store, &key, &policy, ended, expired).await });
}

async fn give_back<S: Store>(
    store: &S,
    key: &str,
    policy: &Policy,
    ended: LocalLease,
    expired: bool,
) {
    if expired {
        metrics::counter!("limiter_leases_expired_total").increment(1);
    }
    let unused = ended.grant.granted - ended.used;
    if unused == 0 {
        return;
    }
    let Some(leases) = store.as_leases() else {
        return;
    };
    match leases.end_lease(key, policy, &ended.grant, unused).await {
        Ok(returned) => {
            metrics::counter!("limiter_leases_returned_total").increment(1);
            metrics::counter!("limiter_lease_permits_returned_total").increment(returned);
        }
        // The permits stay counted until their window ends: never too many.
        Err(error) => tracing::warn!(%error, "giving back a lease's unused permits failed"),
    }
}

/// Takes a lease of `store`, which the engine asks only of a store that
/// leases ([`Capabilities::as_leases`](crate::Capabilities::as_leases)).
async fn take<S: Store>(
    store: &S,
    key: &str,
    policy: &Policy,
    request: &LeaseRequest,
) -> Result<LeaseGrant, Error> {
    crate::store::required(store.as_leases(), "leases")?
        .lease(key, policy, request)
        .await
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The state stays consistent at every unlock; a panic elsewhere
    // does not make it wrong.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use super::*;

    /// A flood of distinct keys that keeps the table full of keys in use
    /// costs one sweep per interval, not one per request; once the keys are
    /// idle, the next sweep forgets them.
    #[test]
    fn a_full_table_is_swept_once_per_interval() {
        let leases = Leases::default();
        let (length, now) = (100_000, 1_000);
        for i in 0..MAX_TRACKED_KEYS {
            assert!(leases.state(&format!("k{i}"), now, length).is_some());
        }
        for i in 0..1_000 {
            assert!(leases.state(&format!("flood{i}"), now, length).is_none());
        }
        assert_eq!(leases.sweep.sweeps.load(Relaxed), 1);
        assert!(leases.state("later", now + 99_999, length).is_none());
        assert_eq!(leases.sweep.sweeps.load(Relaxed), 1);
        assert!(leases.state("later", now + 100_000, length).is_none());
        assert_eq!(leases.sweep.sweeps.load(Relaxed), 2);
        // Idle for two lease lengths: forgotten at the next sweep.
        assert!(leases.state("later", now + 2 * length, length).is_some());
        assert_eq!(leases.sweep.sweeps.load(Relaxed), 3);
        assert_eq!(leases.len(), 1);
    }
}
