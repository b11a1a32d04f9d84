//! The memory store runs the store conformance suite: on the suite's clock,
//! or on a `ManualClock` of its own (still while the suite runs). One test
//! per check.

use std::time::Duration;

use limiter_conformance::{self as conformance, Harness};
use limiter_core::{Capabilities, Decision, Error, Key, ManualClock, MemoryStore, Policy, Store};

struct Memory;

impl Harness for Memory {
    type Store = MemoryStore<ManualClock>;

    async fn store(&self, clock: Option<ManualClock>) -> Self::Store {
        let own = || ManualClock::new(Duration::from_secs(1_750_000_000));
        MemoryStore::with_clock(clock.unwrap_or_else(own))
    }
}

#[tokio::test]
async fn traces() {
    conformance::traces(&Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency() {
    conformance::concurrency(&Memory).await;
}

#[tokio::test]
async fn expiry() {
    conformance::expiry(&Memory).await;
}

#[tokio::test]
async fn costs() {
    conformance::costs(&Memory).await;
}

#[tokio::test]
async fn cancellation() {
    conformance::cancellation(&Memory).await;
}

/// The memory store is in process: the check needs no unreachable backend
/// (and fails for a store across a network whose harness gives none).
#[tokio::test]
async fn failure_needs_no_backend_in_process() {
    conformance::failure(&Memory).await;
}

/// A store across a network (as far as the suite can tell), whose harness
/// gives no store of a backend that does not answer.
struct Remote(MemoryStore<ManualClock>);

impl Capabilities for Remote {}

impl Store for Remote {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.0.check(key, policy, cost).await
    }
}

struct NoUnreachable;

impl Harness for NoUnreachable {
    type Store = Remote;

    async fn store(&self, clock: Option<ManualClock>) -> Self::Store {
        Remote(Memory.store(clock).await)
    }
}

#[tokio::test]
#[should_panic(
    expected = "the store has a backend across a network, which the harness does not exercise"
)]
async fn a_remote_store_without_an_unreachable_one_fails_the_failure_check() {
    conformance::failure(&NoUnreachable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permits() {
    conformance::permits(&Memory).await;
}

#[tokio::test]
async fn peek() {
    conformance::peek(&Memory).await;
}

#[tokio::test]
async fn reset() {
    conformance::reset(&Memory).await;
}

#[tokio::test]
async fn penalties() {
    conformance::penalties(&Memory).await;
}

#[tokio::test]
async fn refunds() {
    conformance::refunds(&Memory).await;
}
