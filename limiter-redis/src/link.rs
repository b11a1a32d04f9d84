//! A connection shared by every call: made in a task of its own, so a call
//! that gives up at its deadline does not abandon the attempt (the next call
//! finds it done or joins it), forgotten when it proves wrong, so the next
//! call makes another, and never handed out once it is known closed (the
//! server closed it while it sat idle): a fresh one is made instead. Every
//! Redis link of every store (primary, Sentinel, regional) is held this way.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::RedisError;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use limiter_core::Error;

/// One connection shared by every call, made when there is none or the
/// one held is known closed, by a task of its own.
pub struct Link<T> {
    state: Mutex<State<T>>,
}

impl<T> std::fmt::Debug for Link<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*lock(&self.state) {
            State::Idle { .. } => "idle",
            State::Connecting { .. } => "connecting",
            State::Ready { .. } => "ready",
        };
        f.debug_struct("Link").field("state", &state).finish()
    }
}

enum State<T> {
    Idle {
        next_id: u64,
    },
    Connecting {
        id: u64,
        outcome: watch::Receiver<Option<Result<T, Failed>>>,
        task: AbortHandle,
    },
    Ready {
        id: u64,
        connection: T,
    },
}

/// Why an attempt to connect failed; cloned to every call that waited on it.
#[derive(Clone)]
enum Failed {
    Redis(RedisError),
    Timeout(Duration),
    Abandoned,
}

impl From<Failed> for Error {
    fn from(failed: Failed) -> Self {
        match failed {
            Failed::Redis(error) => crate::redis_error(error),
            Failed::Timeout(timeout) => Error::Timeout(timeout),
            Failed::Abandoned => crate::redis_error(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "the connection attempt was abandoned: the primary changed",
            ))),
        }
    }
}

/// A connection that may be known to have ended.
pub trait Live {
    /// Whether nothing sent on it could reach the server any more.
    fn is_closed(&self) -> bool;
}

/// redis-rs's cluster client holds a connection per node and makes each
/// again itself; the link holds the client.
impl Live for redis::cluster_async::ClusterConnection {
    fn is_closed(&self) -> bool {
        false
    }
}

impl<T: Clone + Live + Send + Sync + 'static> Link<T> {
    /// A link holding no connection yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::Idle { next_id: 0 }),
        })
    }

    /// The connection and its id (for [`forget`](Self::forget)), connecting
    /// first when there is none. `connect` runs in a task of its own, for
    /// `timeout` at most.
    pub async fn get<F>(
        self: &Arc<Self>,
        connect: impl FnOnce() -> F,
        timeout: Duration,
    ) -> Result<(T, u64), Error>
    where
        F: Future<Output = Result<T, RedisError>> + Send + 'static,
    {
        let (id, mut outcome) = {
            let mut state = lock(&self.state);
            let start = match &*state {
                State::Ready { id, connection } if !connection.is_closed() => {
                    return Ok((connection.clone(), *id));
                }
                // Joins the attempt under way.
                State::Connecting { id, outcome, .. } => Err((*id, outcome.clone())),
                // Closed by the server: nothing was sent on it yet, so the
                // call goes out on a fresh one.
                State::Ready { id, .. } => {
                    tracing::debug!("Redis closed an idle connection: connecting again");
                    Ok(id + 1)
                }
                State::Idle { next_id } => Ok(*next_id),
            };
            match start {
                Ok(id) => self.start(&mut state, id, connect(), timeout),
                Err(under_way) => under_way,
            }
        };
        let result = match outcome.wait_for(Option::is_some).await {
            Ok(result) => result.clone().unwrap_or(Err(Failed::Abandoned)),
            Err(_) => Err(Failed::Abandoned),
        };
        Ok((result?, id))
    }

    /// Starts attempt `id` in a task of its own, for `timeout` at most.
    fn start<F>(
        self: &Arc<Self>,
        state: &mut State<T>,
        id: u64,
        attempt: F,
        timeout: Duration,
    ) -> (u64, watch::Receiver<Option<Result<T, Failed>>>)
    where
        F: Future<Output = Result<T, RedisError>> + Send + 'static,
    {
        let (sender, outcome) = watch::channel(None);
        // The task holds no strong reference: a store dropped meanwhile is
        // not kept alive (and aborts the task).
        let link = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let result = match tokio::time::timeout(timeout, attempt).await {
                Ok(Ok(connection)) => Ok(connection),
                Ok(Err(error)) => Err(Failed::Redis(error)),
                Err(_) => Err(Failed::Timeout(timeout)),
            };
            if let Some(link) = link.upgrade() {
                link.settle(id, &result);
            }
            let _ = sender.send(Some(result));
        });
        *state = State::Connecting {
            id,
            outcome: outcome.clone(),
            task: task.abort_handle(),
        };
        (id, outcome)
    }

    /// Keeps what an attempt made (unless it was forgotten meanwhile).
    fn settle(&self, attempt: u64, result: &Result<T, Failed>) {
        let mut state = lock(&self.state);
        if matches!(&*state, State::Connecting { id, .. } if *id == attempt) {
            *state = match result {
                Ok(connection) => State::Ready {
                    id: attempt,
                    connection: connection.clone(),
                },
                Err(_) => State::Idle {
                    next_id: attempt + 1,
                },
            };
        }
    }

    /// Forgets connection `id` (it broke, or it leads to the wrong node), so
    /// the next call connects afresh. A newer connection is kept.
    pub fn forget(&self, id: u64) {
        let mut state = lock(&self.state);
        if matches!(&*state, State::Ready { id: current, .. } if *current == id) {
            *state = State::Idle { next_id: id + 1 };
        }
    }

    /// Forgets the connection if it is `stale`, and with `attempts_too` a
    /// connection being made (it may lead where the stale one did).
    /// Answers whether one was forgotten.
    pub fn forget_where(&self, stale: impl Fn(&T) -> bool, attempts_too: bool) -> bool {
        let mut state = lock(&self.state);
        let next_id = match &*state {
            State::Ready { id, connection } if stale(connection) => id + 1,
            State::Connecting { id, task, .. } if attempts_too => {
                task.abort();
                id + 1
            }
            _ => return false,
        };
        *state = State::Idle { next_id };
        true
    }
}

impl<T: Clone> Link<T> {
    /// The connection, when there is one.
    pub fn current(&self) -> Option<T> {
        match &*lock(&self.state) {
            State::Ready { connection, .. } => Some(connection.clone()),
            _ => None,
        }
    }
}

impl<T> Drop for Link<T> {
    fn drop(&mut self) {
        if let State::Connecting { task, .. } = &*lock(&self.state) {
            task.abort();
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
