//! The memory store runs the store conformance suite: its own time is a
//! `ManualClock` (still while the suite runs), the suite's times go
//! through `MemoryStore::check_at`. One test per check.

use std::time::Duration;

use limiter_conformance::{self as conformance, Harness};
use limiter_core::{Decision, Error, ManualClock, MemoryStore, Policy};

struct Memory;

impl Harness for Memory {
    type Store = MemoryStore<ManualClock>;

    async fn store(&self) -> Self::Store {
        MemoryStore::with_clock(ManualClock::new(Duration::from_secs(1_750_000_000)))
    }

    async fn check_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Result<Decision, Error> {
        store.check_at(key, policy, cost, now_us)
    }

    async fn peek_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Option<Result<Decision, Error>> {
        Some(store.peek_at(key, policy, cost, now_us))
    }

    async fn check_refundable_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Option<Result<(Decision, Option<limiter_core::Receipt>), Error>> {
        Some(store.check_refundable_at(key, policy, cost, now_us))
    }

    async fn penalize_at(
        &self,
        store: &Self::Store,
        key: &str,
        penalty: &limiter_core::Penalty,
        now_us: u64,
    ) -> Option<Result<Option<Duration>, Error>> {
        Some(Ok(store.penalize_at(key, penalty, now_us)))
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

/// A harness that hides a capability the store has: checks only what
/// every store does.
struct Hiding;

impl Harness for Hiding {
    type Store = MemoryStore<ManualClock>;

    async fn store(&self) -> Self::Store {
        Memory.store().await
    }

    async fn check_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> Result<Decision, Error> {
        Memory.check_at(store, key, policy, cost, now_us).await
    }
}

#[tokio::test]
#[should_panic(expected = "the store has KeyState::peek, which the harness does not exercise")]
async fn a_peek_the_harness_hides_fails_the_check() {
    conformance::peek(&Hiding).await;
}

#[tokio::test]
#[should_panic(
    expected = "the store has SharedControl::penalize, which the harness does not exercise"
)]
async fn penalties_the_harness_hides_fail_the_check() {
    conformance::penalties(&Hiding).await;
}

#[tokio::test]
#[should_panic(
    expected = "the store has KeyState::check_refundable, which the harness does not exercise"
)]
async fn refunds_the_harness_hides_fail_the_check() {
    conformance::refunds(&Hiding).await;
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
