//! Work a request's outcome calls for, which ends even when the request's
//! future is dropped meanwhile (the client went away): a refund once the
//! response said the request does not count, a penalty once the store
//! denied it. Half done, such work would leave the store wrong (a penalty
//! counted whose block was never applied).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::context::BoxFuture;

/// Detached work under way.
pub(crate) enum Detached {
    /// On the runtime, where it ends even if this is dropped.
    Spawned(tokio::task::JoinHandle<()>),
    /// Without a runtime to spawn on: polled here.
    Here(BoxFuture<()>),
}

impl Detached {
    /// Starts `work`, polled here once first: `None` when that finished it
    /// (the memory store's calls), else the work under way.
    pub(crate) fn start(mut work: BoxFuture<()>, cx: &mut Context<'_>) -> Option<Self> {
        if work.as_mut().poll(cx).is_ready() {
            return None;
        }
        Some(match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Self::Spawned(runtime.spawn(work)),
            Err(_) => Self::Here(work),
        })
    }

    /// Runs `work` to its end, detached from the caller's future.
    pub(crate) async fn run(work: BoxFuture<()>) {
        let mut work = Some(work);
        let mut under_way: Option<Self> = None;
        std::future::poll_fn(|cx| {
            if let Some(work) = work.take() {
                match Self::start(work, cx) {
                    None => return Poll::Ready(()),
                    Some(started) => under_way = Some(started),
                }
            }
            under_way.as_mut().map_or(Poll::Ready(()), |w| w.poll(cx))
        })
        .await;
    }

    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            // Work that panicked is over too.
            Self::Spawned(task) => Pin::new(task).poll(cx).map(|_| ()),
            Self::Here(work) => work.as_mut().poll(cx),
        }
    }
}
