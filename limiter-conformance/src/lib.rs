//! The store conformance suite of limiter: one set of checks that any
//! [`Store`] runs
//! by implementing a small [`Harness`] and calling [`run`], as every
//! backend of Bucket4j extends its abstract distributed-bucket test. The
//! memory store, the Redis store (standalone, Cluster, Sentinel) and the
//! regional store run it; a store of your own (Postgres, DynamoDB) can too.
//!
//! The oracle is a reference model of every algorithm ([`KeyModel`]),
//! written from the policies' definitions and sharing no code with the
//! algorithms the stores run. Every check asserts exact outcomes:
//!
//! | check | what it asserts |
//! |---|---|
//! | [`traces`] | pseudo-random traces of (time step, key, cost), every algorithm: every field of every decision equals the model's |
//! | [`concurrency`] | tasks racing on one key at the store's own time admit exactly the limit |
//! | [`expiry`] | once a key's longest window has passed (two windows for the sliding window counter, a full drain for buckets), it has its whole quota again |
//! | [`costs`] | costs consume as the model says; a cost no policy can pass, or of zero, is [`Error::Config`], and so is an algorithm the store refuses |
//! | [`cancellation`] | a check dropped after 0, 1, 2, … polls leaves the store answering and never lets the key pass more than its limit |
//! | [`failure`] | a store whose backend does not answer answers a store error within 2 s (a bad cost still [`Error::Config`]) |
//! | [`peek`] | when the harness peeks ([`Harness::peek_at`]): before each check of pseudo-random traces, a peek answers every field the model's check would, and the check after it answers as if no peek had been made |
//! | [`penalties`] | when the harness counts penalties ([`Harness::penalize_at`]): every denial of pseudo-random sequences earns the block the model ([`PenaltyState`](limiter_core::PenaltyState)) does |
//! | [`refunds`] | when the harness counts by outcome ([`Harness::check_refundable_at`]): on pseudo-random traces of the algorithms that refund exactly, with requests given back at random later steps, every decision equals the model's ([`KeyModel::refund`]); the others refuse with [`Error::Config`] |
//! | [`reset`] | when the store forgets keys ([`KeyState::reset`](limiter_core::KeyState::reset)): a key used up and reset answers as a fresh key; the key beside it keeps its state |
//! | [`permits`] | when the store keeps [concurrency permits](limiter_core::Permits) ([`Capabilities::as_permits`](limiter_core::Capabilities::as_permits)): at most the maximum held, racing or not; a dropped permit given back |
//!
//! A check that fails panics with a message naming the check, the
//! algorithm, the case and step, and both answers. The cases are
//! pseudo-random but fixed (seeded by the check, the algorithm and the
//! case number), so a failure replays.
//!
//! # Running it
//! Add `limiter-conformance` to your store crate's dev-dependencies,
//! implement [`Harness`], and call [`run`] from a test (or each check from
//! a test of its own):
//!
//! ```
//! use std::time::Duration;
//! use limiter_conformance::{self as conformance, Harness};
//! use limiter_core::{Decision, Error, ManualClock, MemoryStore, Policy};
//!
//! struct Memory;
//!
//! impl Harness for Memory {
//!     type Store = MemoryStore<ManualClock>;
//!
//!     async fn store(&self) -> Self::Store {
//!         MemoryStore::with_clock(ManualClock::new(Duration::from_secs(1_000)))
//!     }
//!
//!     async fn check_at(
//!         &self,
//!         store: &Self::Store,
//!         key: &str,
//!         policy: &Policy,
//!         cost: u64,
//!         now_us: u64,
//!     ) -> Result<Decision, Error> {
//!         store.check_at(key, policy, cost, now_us)
//!     }
//! }
//!
//! # let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! # runtime.block_on(async {
//! // Inside #[tokio::test]s in your tests: each check alone, or all of
//! // them with `conformance::run`.
//! conformance::traces(&Memory).await;
//! conformance::costs(&Memory).await;
//! # });
//! ```
//!
//! A check never passes by skipping what the store has: the memory store
//! peeks, so this harness, which does not implement
//! [`Harness::peek_at`], fails the [`peek`] check, naming the capability
//! (and likewise for penalties, refunds, and a remote store without
//! [`Harness::unreachable`]).
//!
//! [`Harness::check_at`] decides at a time the suite gives: a store that
//! reads a server's clock needs a way to be told the time in tests (the
//! Redis store's `check_at` under the `test-util` feature passes it to its
//! scripts). [`Harness::unreachable`] gives the same kind of store pointed
//! at a backend that does not answer (a port nothing listens on), for the
//! [`failure`] check; without it that check is skipped. A store that runs
//! only some algorithms, or runs one with other windows than the policy
//! defines, says so in [`Harness::support`].
//!
//! Keys carry the process id and a counter of runs, so a store shared by
//! several runs (one Redis server) needs no cleaning between them.

mod checks;
mod model;
mod params;
mod traces;

use std::future::Future;

pub use checks::control::{peek, penalties, reset};
pub use checks::failure::failure;
pub use checks::own_time::{cancellation, concurrency, poll_then_drop};
pub use checks::permits::permits;
pub use checks::refunds::refunds;
pub use checks::timed::{costs, expiry};
pub use checks::traces::traces;
pub use model::{KeyModel, Outcome};
pub use params::Params;

use limiter_core::{Algorithm, Decision, Error, Policy, Store};

/// Every algorithm, in the order the checks run them.
pub const ALGORITHMS: [Algorithm; 6] = Algorithm::ALL;

/// How a store runs an algorithm, which decides the checks it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Support {
    /// As the policy defines it: every check, every decision compared with
    /// the model field by field.
    Exact,
    /// Exactly within its limit, but not with the policy's windows (a fixed
    /// window aligned to multiples of the window, say): the traces are
    /// skipped; the other checks hold it to the limit, and compare whether
    /// each request is allowed and how many remain only where the windows
    /// do not matter (at one instant, in a fresh window).
    LimitOnly,
    /// Refused: every check answers [`Error::Config`] for it (the
    /// [`costs`] check asserts that), and nothing else is checked.
    Refused,
}

/// What the suite needs of a store: fresh stores, checks at a time the
/// suite gives, and what the store supports.
///
/// Methods return `impl Future + Send`; an implementation may write them
/// as `async fn`.
pub trait Harness: Send + Sync {
    /// The store under test.
    type Store: Store;

    /// A store to check, connected; no key the suite uses holds state in
    /// it. Each check asks for one.
    fn store(&self) -> impl Future<Output = Self::Store> + Send;

    /// Checks a request of `cost` against `policy` on `key` at `now_us`
    /// (µs since the Unix epoch) instead of the store's own time, exactly
    /// as [`Store::check`] would at that time. The suite's times only move
    /// forward within a check.
    fn check_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send;

    /// A store of the same kind whose backend does not answer (a server
    /// that is down), for the [`failure`] check; `None` (the default) for a
    /// store without a backend, and the check is skipped.
    fn unreachable(&self) -> impl Future<Output = Option<Self::Store>> + Send {
        async { None }
    }

    /// What a check of `cost` on `key` would answer at `now_us`, recording
    /// nothing (see [`KeyState::peek`](limiter_core::KeyState::peek)), for the [`peek`] check; `None`
    /// (the default) for a store that does not peek, and the check is
    /// skipped.
    fn peek_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> impl Future<Output = Option<Result<Decision, Error>>> + Send {
        let _ = (store, key, policy, cost, now_us);
        async { None }
    }

    /// Counts a denial of `key` by `penalty` at `now_us`, as
    /// [`SharedControl::penalize`](limiter_core::SharedControl::penalize) would at that
    /// time, for the [`penalties`] check; `None` (the default) for a store
    /// that counts none, and the check is skipped.
    fn penalize_at(
        &self,
        store: &Self::Store,
        key: &str,
        penalty: &limiter_core::Penalty,
        now_us: u64,
    ) -> impl Future<Output = Option<Result<Option<std::time::Duration>, Error>>> + Send {
        let _ = (store, key, penalty, now_us);
        async { None }
    }

    /// Checks a request counted by outcome at `now_us`, as
    /// [`KeyState::check_refundable`](limiter_core::KeyState::check_refundable)
    /// would at that time, for the [`refunds`] check; `None` (the default)
    /// for a store that gives nothing back, and the check is skipped.
    #[allow(clippy::type_complexity)]
    fn check_refundable_at(
        &self,
        store: &Self::Store,
        key: &str,
        policy: &Policy,
        cost: u64,
        now_us: u64,
    ) -> impl Future<Output = Option<Result<(Decision, Option<limiter_core::Receipt>), Error>>> + Send
    {
        let _ = (store, key, policy, cost, now_us);
        async { None }
    }

    /// How the store runs `algorithm` (the default: [`Support::Exact`]).
    fn support(&self, algorithm: Algorithm) -> Support {
        let _ = algorithm;
        Support::Exact
    }
}

/// Runs every check on `harness`'s store, in the order of the table above;
/// panics at the first that fails, naming it.
pub async fn run<H: Harness>(harness: &H) {
    traces(harness).await;
    concurrency(harness).await;
    expiry(harness).await;
    costs(harness).await;
    cancellation(harness).await;
    failure(harness).await;
    permits(harness).await;
    peek(harness).await;
    reset(harness).await;
    penalties(harness).await;
    refunds(harness).await;
}
