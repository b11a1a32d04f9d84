//! Stores on a manual clock, each call at a time the test gives: how the
//! tests drive windows by hand now that a store takes its time from the
//! clock it is built with.

use std::ops::Deref;
use std::time::Duration;

use limiter_core::{
    Acquired, ConcurrencyLimit, Decision, Error, Key, ManualClock, MemoryStore, Permits, Policy,
    Store,
};
use limiter_redis::{RedisConfig, RedisStore};

/// A store and the clock it reads. Clones share both.
#[derive(Debug, Clone)]
pub struct At<S> {
    /// The store.
    pub store: S,
    /// Its clock.
    pub clock: ManualClock,
}

impl<S> Deref for At<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.store
    }
}

impl<S> At<S> {
    /// The store, its clock set to `now` µs since the Unix epoch.
    pub fn now(&self, now: u64) -> &S {
        self.clock.set(Duration::from_micros(now));
        &self.store
    }
}

impl<S: Store> At<S> {
    /// Checks `key` (given as text) at `now` µs.
    pub async fn check_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.now(now).check(&Key::from(key), policy, cost).await
    }
}

impl At<MemoryStore<ManualClock>> {
    /// A memory store on a clock of its own, with `build`'s settings.
    pub fn memory_with(
        build: impl FnOnce(MemoryStore<ManualClock>) -> MemoryStore<ManualClock>,
    ) -> Self {
        let clock = ManualClock::default();
        let store = build(MemoryStore::with_clock(clock.clone()));
        Self { store, clock }
    }

    /// A memory store on a clock of its own.
    pub fn memory() -> Self {
        Self::memory_with(|store| store)
    }

    /// Checks `key` (given as text) at `now` µs, at once.
    pub fn decide_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.now(now).check_now(&Key::from(key), policy, cost)
    }
}

/// The tests' settings: a response timeout generous for a loaded machine.
pub fn patient() -> RedisConfig {
    RedisConfig::new().response_timeout(Duration::from_secs(5))
}

/// `config` on a clock of its own, and the clock: for a store the test
/// connects itself (to a Cluster, through Sentinel).
pub fn clocked(config: RedisConfig) -> (RedisConfig, ManualClock) {
    let clock = ManualClock::default();
    (config.manual_clock(clock.clone()), clock)
}

impl At<RedisStore> {
    /// A store connected to `url` with `config`, on a clock of its own.
    pub async fn redis(url: &str, config: RedisConfig) -> Self {
        let (config, clock) = clocked(config);
        let store = RedisStore::connect_with(url, config)
            .await
            .expect("connect to the test Redis");
        Self { store, clock }
    }

    /// Decides `costs` on `key` at `now` µs in one call of the batch script.
    pub async fn check_batch_at(
        &self,
        key: &str,
        policy: &Policy,
        costs: &[u64],
        now: u64,
    ) -> Result<Vec<Decision>, Error> {
        self.now(now).check_batch(key, policy, costs).await
    }

    /// Checks `keys` (one request of `cost` each, in order) at `now` µs in
    /// one call of the script of several keys.
    pub async fn check_keys_at(
        &self,
        keys: &[&str],
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Vec<Decision>, Error> {
        self.now(now).check_keys(keys, policy, cost).await
    }

    /// Takes a permit at `now` µs (not renewed).
    pub async fn acquire_permit_at(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
        now: u64,
    ) -> Result<Acquired, Error> {
        self.now(now).acquire_permit(key, limit).await
    }
}
