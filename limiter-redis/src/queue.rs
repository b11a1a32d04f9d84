//! The checks of each key waiting for the call in flight, as coalescing
//! (`coalesce.rs`) queues them: one table per store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use tokio::sync::oneshot;
use tokio::time::Instant;

use limiter_core::{Decision, Error, Policy};

/// The checks waiting for each key's call in flight.
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) queues: Mutex<HashMap<Box<str>, Vec<Queue>, foldhash::fast::RandomState>>,
    pub(crate) next_id: AtomicU64,
}

/// A call in flight for a key, under one policy (and, in tests, at one
/// caller's time), and the checks that will go in the next one.
pub(crate) struct Queue {
    pub(crate) id: u64,
    pub(crate) policy: Policy,
    pub(crate) now: Option<u64>,
    pub(crate) waiting: Vec<Waiter>,
    /// The call in flight is the batches' task's, which answers every
    /// caller by its deadline; while it is the first caller's own, whose
    /// future its caller may stop polling without dropping it, the callers
    /// queued behind it keep a timer of their own.
    pub(crate) in_task: bool,
}

pub(crate) struct Waiter {
    pub(crate) cost: u64,
    /// When its caller must have its answer.
    pub(crate) deadline: Instant,
    pub(crate) answer: oneshot::Sender<Result<Decision, Error>>,
}
