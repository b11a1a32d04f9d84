//! Permits in memory, and through a guarded store whose store fails.

use std::time::Duration;

use super::*;
use crate::{
    Acquired, Capabilities, Error, GuardConfig, Guarded, ManualClock, MemoryStore, OnStoreError,
    Permits, Policy, Store, async_trait,
};

fn two() -> ConcurrencyLimit {
    ConcurrencyLimit::new(2).unwrap()
}

#[tokio::test]
async fn at_most_max_permits_are_held_and_a_dropped_one_is_given_back() {
    let store = MemoryStore::new();
    let first = store.acquire_permit("k", &two()).await.unwrap();
    assert_eq!(first.decision().remaining(), 1);
    let second = store.acquire_permit("k", &two()).await.unwrap();
    assert_eq!((second.allowed(), second.decision().remaining()), (true, 0));
    let denied = store.acquire_permit("k", &two()).await.unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.decision().limit(), 2);
    assert_eq!(denied.decision().rule().to_string(), "2-per-30s");
    assert!(
        store
            .acquire_permit("other", &two())
            .await
            .unwrap()
            .allowed()
    );
    assert_eq!(store.permits_held("k"), 2);
    drop(first);
    assert_eq!(store.permits_held("k"), 1);
    let third = store.acquire_permit("k", &two()).await.unwrap();
    assert!(third.allowed());
    drop((second, third));
    assert_eq!(store.permits_held("k"), 0);
}

/// A store that is down for everything.
#[derive(Debug)]
struct Down;

impl Capabilities for Down {
    fn as_permits(&self) -> Option<&dyn Permits> {
        Some(self)
    }
}

impl Store for Down {
    async fn check(&self, _: &crate::Key, _: &Policy, _: u64) -> Result<crate::Decision, Error> {
        Err(Error::Protocol("down".into()))
    }
}

#[async_trait]
impl Permits for Down {
    async fn acquire_permit(&self, _: &str, _: &ConcurrencyLimit) -> Result<Acquired, Error> {
        Err(Error::Protocol("down".into()))
    }
}

#[tokio::test]
async fn a_failed_store_decides_permits_by_the_failure_policy() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let guarded = Guarded::with_clock(Down, GuardConfig::default(), clock);
    let limit = ConcurrencyLimit::new(4).unwrap();
    // The fallback holds a share: 4 divided by 2 instances.
    let fallback = OnStoreError::Fallback { instances: 2 };
    let held: Vec<Acquired> = {
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(
                guarded
                    .acquire_permit_with("k", &limit, fallback)
                    .await
                    .unwrap(),
            );
        }
        held
    };
    let allowed: Vec<bool> = held.iter().map(Acquired::allowed).collect();
    assert_eq!(allowed, [true, true, false]);
    drop(held);
    assert!(
        guarded
            .acquire_permit_with("k", &limit, fallback)
            .await
            .unwrap()
            .allowed()
    );
    let open = guarded
        .acquire_permit_with("k", &limit, OnStoreError::FailOpen)
        .await
        .unwrap();
    assert!(open.allowed());
    let closed = guarded
        .acquire_permit_with("k", &limit, OnStoreError::FailClosed)
        .await;
    assert!(matches!(closed, Err(Error::Unavailable(_))));
}

/// Where the store's type is named, a store without permits is a compile
/// error; where it is not (the HTTP layer), asking says there are none.
#[tokio::test]
async fn a_store_without_permits_says_so() {
    #[derive(Debug)]
    struct RatesOnly;
    impl Capabilities for RatesOnly {}
    impl Store for RatesOnly {
        async fn check(
            &self,
            _: &crate::Key,
            p: &Policy,
            _: u64,
        ) -> Result<crate::Decision, Error> {
            Ok(crate::Decision::unchecked(p))
        }
    }
    assert!(RatesOnly.as_permits().is_none());
    let guarded = Guarded::new(RatesOnly, GuardConfig::default());
    assert!(guarded.as_permits().is_none());
    let refused = guarded.acquire_permit("k", &two()).await;
    assert!(matches!(
        refused,
        Err(Error::Unsupported("concurrency limits"))
    ));
    assert_eq!(guarded.breaker_state(), crate::BreakerState::Closed);
}
