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
//! | [`costs`] | costs consume as the model says; a cost no policy can pass, or of zero, is [`Error::Config`](limiter_core::Error::Config), and so is an algorithm the store refuses |
//! | [`cancellation`] | a check dropped after 0, 1, 2, … polls leaves the store answering and never lets the key pass more than its limit |
//! | [`failure`] | a store whose backend does not answer answers a store error within 2 s (a bad cost still [`Error::Config`](limiter_core::Error::Config)) |
//! | [`peek`] | when the store peeks ([`KeyState`](limiter_core::KeyState)): before each check of pseudo-random traces, a peek answers every field the model's check would, and the check after it answers as if no peek had been made |
//! | [`penalties`] | when the store counts penalties ([`SharedControl`](limiter_core::SharedControl)): every denial of pseudo-random sequences earns the block the model ([`PenaltyState`](limiter_core::PenaltyState)) does |
//! | [`refunds`] | when the store counts by outcome ([`KeyState`](limiter_core::KeyState)): on pseudo-random traces of the algorithms that refund exactly, with requests given back at random later steps, every decision equals the model's ([`KeyModel::refund`]); the others refuse with [`Error::Config`](limiter_core::Error::Config) |
//! | [`reset`] | when the store forgets keys ([`KeyState::reset`](limiter_core::KeyState::reset)): a key used up and reset answers as a fresh key; the key beside it keeps its state |
//! | [`reports`] | when the store keeps reports ([`SharedControl::publish_report`](limiter_core::SharedControl::publish_report)): each instance's latest report on a board is read with its age by the store's clock until its time to live has passed, not a microsecond longer; boards are apart; a report past its bound is refused |
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
//! use limiter_core::{ManualClock, MemoryStore};
//!
//! struct Memory;
//!
//! impl Harness for Memory {
//!     type Store = MemoryStore<ManualClock>;
//!
//!     async fn store(&self, clock: Option<ManualClock>) -> Self::Store {
//!         // Its own time: any clock will do, nothing moves it.
//!         let own = || ManualClock::new(Duration::from_secs(1_000));
//!         MemoryStore::with_clock(clock.unwrap_or_else(own))
//!     }
//! }
//!
//! # let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! # runtime.block_on(async {
//! // Inside #[tokio::test]s in your tests: each check alone, or all of
//! // them with `conformance::run`.
//! conformance::traces(&Memory).await;
//! conformance::peek(&Memory).await;
//! # });
//! ```
//!
//! A check never passes by skipping what the store has: the suite asks the
//! store for each capability ([`Capabilities`](limiter_core::Capabilities)),
//! not the harness. A store across a network whose harness gives no
//! [`Harness::unreachable`] store (the same kind of store pointed at a
//! backend that does not answer, a port nothing listens on) fails the
//! [`failure`] check, naming it. A store that runs only some algorithms,
//! or runs one with other windows than the policy defines, says so in
//! [`Harness::support`].
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
pub use checks::reports::reports;
pub use checks::timed::{costs, expiry};
pub use checks::traces::traces;
pub use model::{KeyModel, Outcome};
pub use params::Params;

use limiter_core::{Algorithm, ManualClock, Store};

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
    /// Refused: every check answers [`Error::Config`](limiter_core::Error::Config) for it (the
    /// [`costs`] check asserts that), and nothing else is checked.
    Refused,
}

/// What the suite needs of a store: fresh stores, on the suite's clock or
/// on their own time, and what the store supports. The suite reaches what
/// the store does besides checks through its
/// [`Capabilities`](limiter_core::Capabilities), so a harness cannot hide
/// a capability from it.
///
/// Methods return `impl Future + Send`; an implementation may write them
/// as `async fn`.
pub trait Harness: Send + Sync {
    /// The store under test.
    type Store: Store;

    /// A store to check, connected; no key the suite uses holds state in
    /// it. Each check asks for one. With a `clock`, every call of the
    /// store takes its time from it, which the suite moves (only forward
    /// within a check): a store that reads a server's clock needs a way to
    /// be told the time in tests (the Redis store's
    /// `RedisConfig::manual_clock` under its `test-util` feature). `None`:
    /// the store's own time.
    fn store(&self, clock: Option<ManualClock>) -> impl Future<Output = Self::Store> + Send;

    /// A store of the same kind whose backend does not answer (a server
    /// that is down), on `clock` as [`store`](Self::store) makes one, for
    /// the [`failure`] check; `None` (the default) for a store without a
    /// backend, and the check is skipped.
    fn unreachable(
        &self,
        clock: Option<ManualClock>,
    ) -> impl Future<Output = Option<Self::Store>> + Send {
        let _ = clock;
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
    reports(harness).await;
}
