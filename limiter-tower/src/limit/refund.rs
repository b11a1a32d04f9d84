//! Counting by outcome: a request recorded when it was admitted is given
//! back once its response says it does not count. The refund runs to its
//! end even when the response future is dropped meanwhile (the client went
//! away after the response was made): the outcome was known.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, StatusCode};
use limiter_core::{Policy, Receipt};

use crate::business::CountWhen;
use crate::context::{BoxFuture, DynStore};

/// Counter: requests given back because their response did not count.
const REFUNDS: &str = "limiter_refunds_total";

/// What gives one admitted request back.
pub(crate) struct Refund {
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) key: String,
    pub(crate) policy: Arc<Policy>,
    pub(crate) receipt: Receipt,
    pub(crate) counts: CountWhen,
}

/// A refund under way, awaited before the response is answered, so that
/// the client's next request finds it made.
pub(crate) enum Refunding {
    /// On the runtime, where it ends even if this is dropped.
    Spawned(tokio::task::JoinHandle<()>),
    /// Without a runtime to spawn on: polled here.
    Here(BoxFuture<()>),
}

impl Refund {
    /// Gives the request back unless `status` and `headers` say it counts:
    /// `None` when it counts or the refund is made already (the memory
    /// store's, on the first poll), else the refund under way.
    pub(crate) fn settle(
        self,
        status: StatusCode,
        headers: &HeaderMap,
        cx: &mut Context<'_>,
    ) -> Option<Refunding> {
        if (self.counts)(status, headers) {
            return None;
        }
        let mut refund: BoxFuture<()> = Box::pin(self.run());
        if refund.as_mut().poll(cx).is_ready() {
            return None;
        }
        Some(match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Refunding::Spawned(runtime.spawn(refund)),
            Err(_) => Refunding::Here(refund),
        })
    }

    async fn run(self) {
        let refunded = self
            .store
            .control()
            .refund(&self.key, &self.policy, &self.receipt)
            .await;
        match refunded {
            Ok(()) => metrics::counter!(REFUNDS).increment(1),
            // The request stays counted: the safe side of a limit.
            Err(error) => {
                tracing::warn!(%error, key = %self.key, "a request could not be given back")
            }
        }
    }
}

impl Refunding {
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            // A refund that panicked leaves the request counted.
            Self::Spawned(task) => Pin::new(task).poll(cx).map(|_| ()),
            Self::Here(refund) => refund.as_mut().poll(cx),
        }
    }
}
