//! Waiting on a manual clock: every wake-up is the clock's move.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::*;
use crate::{ManualClock, MemoryStore, Policy, Rule};

const T0: Duration = Duration::from_secs(1_000);

/// A memory store on a manual clock, counting its checks.
#[derive(Clone)]
struct Counted {
    store: MemoryStore<ManualClock>,
    checks: Arc<AtomicUsize>,
}

impl Counted {
    fn new(clock: &ManualClock) -> Self {
        Self {
            store: MemoryStore::with_clock(clock.clone()),
            checks: Arc::default(),
        }
    }

    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }

    fn check(&self, key: &str, policy: &Policy) -> Result<Decision, Error> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.store.check_text(key, policy, 1)
    }
}

fn one_per(window: Duration) -> Policy {
    Policy::sliding_log([Rule::new(1, window).unwrap()]).unwrap()
}

/// A request of `key` waiting up to `max_wait`, in a task of its own; its
/// allowed answers are pushed to `admitted` as `name`.
fn waiter(
    waiters: &Waiters,
    store: &Counted,
    policy: &Policy,
    max_wait: Duration,
    name: &'static str,
    admitted: &Arc<Mutex<Vec<&'static str>>>,
) -> JoinHandle<Decision> {
    let (waiters, store, policy) = (waiters.clone(), store.clone(), policy.clone());
    let admitted = Arc::clone(admitted);
    tokio::spawn(async move {
        let decision = waiters
            .acquire("k", max_wait, || async { store.check("k", &policy) })
            .await
            .unwrap();
        if decision.allowed() {
            admitted.lock().unwrap().push(name);
        }
        decision
    })
}

/// Lets every task run until it waits (the runtime has one thread).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_waiter_is_checked_again_exactly_at_its_retry_time() {
    let clock = ManualClock::new(T0);
    let (store, waiters) = (Counted::new(&clock), Waiters::with_clock(clock.clone()));
    let policy = one_per(Duration::from_secs(2));
    assert!(store.check("k", &policy).unwrap().allowed());
    let admitted = Arc::default();
    let task = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(5),
        "a",
        &admitted,
    );
    settle().await;
    assert_eq!((store.checks(), waiters.waiting()), (2, 1));
    clock.advance(Duration::from_secs(2) - Duration::from_micros(1));
    settle().await;
    assert!(!task.is_finished(), "not before its retry time");
    assert_eq!(store.checks(), 2, "and not checked before it");
    clock.advance(Duration::from_micros(1));
    let decision = task.await.unwrap();
    assert!(decision.allowed());
    assert_eq!((store.checks(), waiters.waiting()), (3, 0));
}

#[tokio::test]
async fn waiters_of_a_key_are_admitted_in_the_order_they_came() {
    let clock = ManualClock::new(T0);
    let (store, waiters) = (Counted::new(&clock), Waiters::with_clock(clock.clone()));
    let policy = one_per(Duration::from_secs(1));
    assert!(store.check("k", &policy).unwrap().allowed());
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for name in ["a", "b", "c"] {
        tasks.push(waiter(
            &waiters,
            &store,
            &policy,
            Duration::from_secs(10),
            name,
            &admitted,
        ));
        settle().await;
    }
    // Only the first checked: the later ones joined its queue.
    assert_eq!((store.checks(), waiters.waiting()), (2, 3));
    for (second, expected) in [
        (1, vec!["a"]),
        (2, vec!["a", "b"]),
        (3, vec!["a", "b", "c"]),
    ] {
        clock.set(T0 + Duration::from_secs(second));
        settle().await;
        assert_eq!(*admitted.lock().unwrap(), expected);
    }
    // Each was checked once at its turn, and once more at its retry time.
    assert_eq!(store.checks(), 2 + 1 + 2 + 2);
    for task in tasks {
        assert!(task.await.unwrap().allowed());
    }
}

#[tokio::test]
async fn a_waiter_outrun_at_its_retry_time_waits_again() {
    let clock = ManualClock::new(T0);
    let (store, waiters) = (Counted::new(&clock), Waiters::with_clock(clock.clone()));
    let policy = one_per(Duration::from_secs(1));
    assert!(store.check("k", &policy).unwrap().allowed());
    let admitted = Arc::default();
    let task = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(3),
        "a",
        &admitted,
    );
    settle().await;
    clock.advance(Duration::from_secs(1));
    // Another request (not waiting) takes the freed quota before the waiter runs.
    assert!(store.check("k", &policy).unwrap().allowed());
    settle().await;
    assert!(!task.is_finished(), "denied again, it waits again");
    assert_eq!(store.checks(), 4);
    clock.advance(Duration::from_secs(1));
    assert!(task.await.unwrap().allowed());
}

#[tokio::test]
async fn a_retry_time_beyond_the_bound_is_answered_at_once() {
    let clock = ManualClock::new(T0);
    let (store, waiters) = (Counted::new(&clock), Waiters::with_clock(clock.clone()));
    let policy = one_per(Duration::from_secs(3));
    assert!(store.check("k", &policy).unwrap().allowed());
    let decision = waiters
        .acquire("k", Duration::from_secs(2), || async {
            store.check("k", &policy)
        })
        .await
        .unwrap();
    assert_eq!(decision.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!((store.checks(), waiters.waiting()), (2, 0));
}

#[tokio::test]
async fn a_cancelled_waiter_leaves_and_the_next_one_takes_its_turn() {
    let clock = ManualClock::new(T0);
    let (store, waiters) = (Counted::new(&clock), Waiters::with_clock(clock.clone()));
    let policy = one_per(Duration::from_secs(1));
    assert!(store.check("k", &policy).unwrap().allowed());
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let first = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(5),
        "a",
        &admitted,
    );
    settle().await;
    let second = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(5),
        "b",
        &admitted,
    );
    settle().await;
    first.abort();
    settle().await;
    assert_eq!(waiters.waiting(), 1);
    // The second is first now: it checks at once (denied, 1 s to wait).
    assert_eq!(store.checks(), 3);
    clock.advance(Duration::from_secs(1));
    assert!(second.await.unwrap().allowed());
    assert_eq!(*admitted.lock().unwrap(), ["b"]);
    assert_eq!(waiters.waiting(), 0);
}

#[tokio::test]
async fn beyond_the_bound_of_waiters_a_request_is_denied_at_once() {
    let clock = ManualClock::new(T0);
    let store = Counted::new(&clock);
    let waiters = Waiters::with_clock(clock.clone()).with_max_waiters(1);
    let policy = one_per(Duration::from_secs(1));
    assert!(store.check("k", &policy).unwrap().allowed());
    let admitted = Arc::default();
    let first = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(5),
        "a",
        &admitted,
    );
    settle().await;
    clock.advance(Duration::from_millis(400));
    // The key's queue is full: the key's latest denial, aged, without a check.
    let denied = waiters
        .acquire("k", Duration::from_secs(5), || async {
            store.check("k", &policy)
        })
        .await
        .unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(600)));
    assert_eq!(store.checks(), 2);
    clock.advance(Duration::from_millis(600));
    assert!(first.await.unwrap().allowed());
}

#[tokio::test]
async fn a_waiter_whose_bound_passes_before_its_turn_gets_the_latest_denial() {
    let clock = ManualClock::new(T0);
    let (store, waiters) = (Counted::new(&clock), Waiters::with_clock(clock.clone()));
    let policy = one_per(Duration::from_secs(10));
    assert!(store.check("k", &policy).unwrap().allowed());
    let admitted = Arc::default();
    let first = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(30),
        "a",
        &admitted,
    );
    settle().await;
    let impatient = waiter(
        &waiters,
        &store,
        &policy,
        Duration::from_secs(2),
        "b",
        &admitted,
    );
    settle().await;
    clock.advance(Duration::from_secs(2));
    let denied = impatient.await.unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(8)));
    assert_eq!((store.checks(), waiters.waiting()), (2, 1));
    clock.advance(Duration::from_secs(8));
    assert!(first.await.unwrap().allowed());
}

#[tokio::test]
async fn the_manual_clock_wakes_sleepers_it_moves_past() {
    let clock = ManualClock::new(T0);
    let deadline = (T0 + Duration::from_secs(1)).as_micros() as u64;
    let sleeper = tokio::spawn({
        let clock = clock.clone();
        async move { clock.sleep_until(deadline).await }
    });
    settle().await;
    clock.advance(Duration::from_millis(999));
    settle().await;
    assert!(!sleeper.is_finished());
    clock.advance(Duration::from_millis(1));
    sleeper.await.unwrap();
}
