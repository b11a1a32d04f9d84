//! The checks waiting for a call in flight, as coalescing (`coalesce.rs`,
//! per key: one table per store) and batching across keys
//! (`node_batch.rs`) queue them, and how a queued caller is answered.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

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

/// The checks of other keys waiting for the call in flight to the store's
/// Redis, or to each node of a Cluster (by failure domain), as batching
/// across keys (`node_batch.rs`) queues them.
#[derive(Default)]
pub(crate) struct Gathering {
    pub(crate) nodes: Mutex<HashMap<u64, Gathered>>,
}

#[derive(Default)]
pub(crate) struct Gathered {
    /// A call is in flight: a check queues rather than sending its own.
    pub(crate) busy: bool,
    /// The call in flight is the batches' task's, which answers every
    /// caller by its deadline; while it is a check's own, whose future its
    /// caller may stop polling without dropping it, the callers queued
    /// behind it keep a timer of their own.
    pub(crate) in_task: bool,
    pub(crate) waiting: Vec<Queued>,
}

/// A queued check: its key and what it is checked with, and its caller.
pub(crate) struct Queued {
    pub(crate) key: Box<str>,
    pub(crate) policy: Policy,
    pub(crate) now: Option<u64>,
    pub(crate) waiter: Waiter,
}

/// A queued caller's answer: given by the task that sends its call, which
/// keeps its deadline; or, while the call in flight is another caller's
/// own (`own_timer`), within `timeout` of its own.
pub(crate) async fn answer_of(
    receiver: oneshot::Receiver<Result<Decision, Error>>,
    own_timer: bool,
    timeout: Duration,
) -> Result<Decision, Error> {
    if !own_timer {
        return receiver.await.unwrap_or_else(|_| Err(abandoned()));
    }
    match tokio::time::timeout(timeout, receiver).await {
        Ok(Ok(decision)) => decision,
        Ok(Err(_)) => Err(abandoned()),
        Err(_) => Err(Error::Timeout(timeout)),
    }
}

/// Awaits `call`, which decides the requests of `answers` (each its
/// caller's deadline and where its answer goes) in order, and answers each
/// caller with its decision, the call's error, or a timeout at its own
/// deadline, once. One timer waits for the next deadline (none comes
/// before the call ends, unless Redis is slow); once every caller has
/// timed out, the call is abandoned in flight.
pub(crate) async fn answer_by_deadlines(
    call: impl Future<Output = Result<Vec<Result<Decision, Error>>, Error>>,
    answers: Vec<(Instant, oneshot::Sender<Result<Decision, Error>>)>,
    timeout: Duration,
) {
    let mut answers: Vec<_> = answers.into_iter().map(Some).collect();
    tokio::pin!(call);
    let decided = loop {
        let Some(next) = answers
            .iter()
            .flatten()
            .map(|(deadline, _)| *deadline)
            .min()
        else {
            return;
        };
        tokio::select! {
            biased;
            decided = &mut call => break decided,
            () = tokio::time::sleep_until(next) => {
                let now = Instant::now();
                for answer in &mut answers {
                    if let Some((_, late)) = answer.take_if(|(deadline, _)| *deadline <= now) {
                        let _ = late.send(Err(Error::Timeout(timeout)));
                    }
                }
            }
        }
    };
    let waiting = answers.into_iter().map(|answer| answer.map(|(_, to)| to));
    match decided {
        Ok(decisions) => {
            for (answer, decision) in waiting.zip(decisions) {
                if let Some(answer) = answer {
                    let _ = answer.send(decision);
                }
            }
        }
        Err(error) => {
            for answer in waiting.flatten() {
                let _ = answer.send(Err(error.clone()));
            }
        }
    }
}

/// The error of a caller whose call was abandoned before it answered.
pub(crate) fn abandoned() -> Error {
    crate::redis_error(redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the call was abandoned before it answered",
    )))
}
