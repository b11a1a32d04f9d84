//! Waiting instead of 429, on both stores and every algorithm, on a manual
//! clock (the Redis store is given its times): a waiter is checked again
//! exactly at its retry time, waiters of a key are admitted in the order
//! they came, and a cancelled waiter leaves without a trace.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use limiter_core::{Decision, ManualClock, Policy, Rate, Rule, Waiters};
use limiter_tests::{TimedStore, redis};
use tokio::task::JoinHandle;

const T0: Duration = Duration::from_secs(1_750_000_000);

fn policies() -> Vec<Policy> {
    let second = Duration::from_secs(1);
    let rate = Rate::per_second(2).unwrap();
    vec![
        Policy::sliding_log([Rule::new(2, second).unwrap()]).unwrap(),
        Policy::fixed_window(Rule::new(2, second).unwrap()),
        Policy::sliding_window(Rule::new(2, second).unwrap()),
        Policy::token_bucket(rate, 2).unwrap(),
        Policy::leaky_bucket(rate, 2).unwrap(),
        Policy::gcra(rate, 2).unwrap(),
    ]
}

/// A store checked at the manual clock's time, counting its checks.
#[derive(Clone)]
struct OnClock {
    store: TimedStore,
    clock: ManualClock,
    checks: Arc<AtomicUsize>,
}

impl OnClock {
    async fn check(&self, key: &str, policy: &Policy) -> Result<Decision, limiter_core::Error> {
        let now = limiter_core::Clock::now_micros(&self.clock);
        let decision = self.store.check_at(key, policy, 1, now).await;
        self.checks.fetch_add(1, Ordering::SeqCst);
        decision
    }

    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }

    /// Waits (at most 10 s of real time) until `n` checks have answered.
    async fn until_checked(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.checks() < n {
            assert!(Instant::now() < deadline, "{} of {n} checks", self.checks());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(self.checks(), n, "no check beyond the expected ones");
    }
}

async fn stores(clock: &ManualClock) -> (Vec<OnClock>, limiter_tests::TestRedis) {
    let redis = redis();
    let stores = [TimedStore::memory(), TimedStore::redis(&redis).await];
    let stores = stores
        .into_iter()
        .map(|store| OnClock {
            store,
            clock: clock.clone(),
            checks: Arc::default(),
        })
        .collect();
    (stores, redis)
}

fn wait_for(
    waiters: &Waiters,
    store: &OnClock,
    key: &str,
    policy: &Policy,
    max_wait: Duration,
) -> JoinHandle<Decision> {
    let (waiters, store, key, policy) = (
        waiters.clone(),
        store.clone(),
        key.to_owned(),
        policy.clone(),
    );
    tokio::spawn(async move {
        waiters
            .acquire(&key, max_wait, || store.check(&key, &policy))
            .await
            .unwrap()
    })
}

/// A task that is asleep on the manual clock cannot finish: give a wrong
/// one the time to.
async fn still_waiting(task: &JoinHandle<Decision>) -> bool {
    tokio::time::sleep(Duration::from_millis(50)).await;
    !task.is_finished()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_admits_a_waiter_exactly_at_its_retry_time() {
    let clock = ManualClock::new(T0);
    let (stores, redis) = stores(&clock).await;
    let waiters = Waiters::with_clock(clock.clone());
    for store in &stores {
        for policy in policies() {
            clock.set(T0);
            let key = redis.key(&format!("{}:{}", store.store.name(), policy.algorithm()));
            let before = store.checks();
            let mut denial = None;
            for _ in 0..3 {
                let d = store.check(&key, &policy).await.unwrap();
                denial = (!d.allowed()).then_some(d);
            }
            let retry = denial.expect("the third is denied").retry_after().unwrap();
            let waiter = wait_for(&waiters, store, &key, &policy, Duration::from_secs(2));
            store.until_checked(before + 4).await;
            let what = format!("{} {}", store.store.name(), policy.algorithm());
            clock.advance(retry - Duration::from_micros(1));
            assert!(still_waiting(&waiter).await, "{what}: admitted early");
            assert_eq!(store.checks(), before + 4, "{what}: checked early");
            clock.advance(Duration::from_micros(1));
            let admitted = waiter.await.unwrap();
            assert!(admitted.allowed(), "{what}");
            assert_eq!(store.checks(), before + 5, "{what}");
        }
    }
    assert_eq!(waiters.waiting(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_admitted_in_order_and_a_cancelled_one_leaves_no_trace() {
    let clock = ManualClock::new(T0);
    let (stores, redis) = stores(&clock).await;
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(1)).unwrap()]).unwrap();
    for store in &stores {
        clock.set(T0);
        let waiters = Waiters::with_clock(clock.clone());
        let key = redis.key(&format!("{}:order", store.store.name()));
        assert!(store.check(&key, &policy).await.unwrap().allowed());
        let wait = Duration::from_secs(10);
        let first = wait_for(&waiters, store, &key, &policy, wait);
        store.until_checked(2).await;
        // The next ones join the queue without a check.
        let cancelled = wait_for(&waiters, store, &key, &policy, wait);
        let second = wait_for(&waiters, store, &key, &policy, wait);
        let deadline = Instant::now() + Duration::from_secs(10);
        while waiters.waiting() < 3 {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        cancelled.abort();
        assert!(cancelled.await.unwrap_err().is_cancelled());
        assert_eq!((waiters.waiting(), store.checks()), (2, 2));
        clock.advance(Duration::from_secs(1));
        let first = first.await.unwrap();
        assert!(first.allowed());
        // The second is checked at once after the first, denied for 1 s.
        store.until_checked(4).await;
        assert!(still_waiting(&second).await);
        clock.advance(Duration::from_secs(1));
        assert!(second.await.unwrap().allowed());
        // The cancelled waiter was never checked.
        assert_eq!(store.checks(), 5, "{}", store.store.name());
        assert_eq!(waiters.waiting(), 0);
    }
}
