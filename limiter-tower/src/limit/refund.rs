//! Counting by outcome: a request recorded when it was admitted is given
//! back once its response says it does not count. The refund is
//! [detached](Detached): the outcome was known, so it ends even when the
//! response future is dropped meanwhile. It is awaited before the response
//! is answered, so that the client's next request finds it made.

use std::sync::Arc;
use std::task::Context;

use http::{HeaderMap, StatusCode};
use limiter_core::{Policy, Receipt, required};

use super::detached::Detached;
use crate::business::CountWhen;
use crate::context::{COUNTING, DynStore};

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

impl Refund {
    /// Gives the request back unless `status` and `headers` say it counts:
    /// `None` when it counts or the refund is made already (the memory
    /// store's, on the first poll), else the refund under way.
    pub(crate) fn settle(
        self,
        status: StatusCode,
        headers: &HeaderMap,
        cx: &mut Context<'_>,
    ) -> Option<Detached> {
        if (self.counts)(status, headers) {
            return None;
        }
        Detached::start(Box::pin(self.run()), cx)
    }

    async fn run(self) {
        let refunded = match required(self.store.capabilities().as_refunds(), COUNTING) {
            Ok(refunds) => refunds.refund(&self.key, &self.policy, &self.receipt).await,
            Err(unsupported) => Err(unsupported),
        };
        match refunded {
            Ok(()) => metrics::counter!(REFUNDS).increment(1),
            // The request stays counted: the safe side of a limit.
            Err(error) => {
                tracing::warn!(%error, key = %self.key, "a request could not be given back")
            }
        }
    }
}
