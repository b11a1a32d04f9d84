//! The memory store runs the store conformance suite: its own time is a
//! `ManualClock` (still while the suite runs), the suite's times go
//! through `MemoryStore::check_at`. One test per check.

use std::time::Duration;

use limiter_core::conformance::{self, Harness};
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

#[tokio::test]
async fn failure_is_skipped_without_a_backend() {
    conformance::failure(&Memory).await;
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
