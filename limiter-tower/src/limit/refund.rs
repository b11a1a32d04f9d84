//! Counting by outcome: a request recorded when it was admitted is given
//! back once its response says it does not count. The refund is
//! [detached](Detached): the outcome was known, so it ends even when the
//! response future is dropped meanwhile. It is awaited before the response
//! is answered, so that the client's next request finds it made.

use std::sync::Arc;
use std::task::Context;

use limiter_core::{Error, Policy, Receipt, required};

use super::detached::Detached;
use crate::business::CountWhen;
use crate::context::{COUNTING, DynStore};
use crate::response::Refusal;

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
    /// Gives the request back unless its response says it counts: `None`
    /// when it counts or the refund is made already (the memory store's,
    /// on the first poll), else the refund under way. A response the
    /// limiter made itself (another limit's 429, a block, a refusal) never
    /// counts: the handler decided no outcome.
    pub(crate) fn settle<B>(
        self,
        response: &http::Response<B>,
        cx: &mut Context<'_>,
    ) -> Option<Detached> {
        let refused = response.extensions().get::<Refusal>().is_some();
        if !refused && (self.counts)(response.status(), response.headers()) {
            return None;
        }
        Detached::start(Box::pin(self.run()), cx)
    }

    /// Gives the request back now.
    pub(crate) async fn give_back(&self) -> Result<(), Error> {
        required(self.store.capabilities().as_refunds(), COUNTING)?
            .refund(&self.key, &self.policy, &self.receipt)
            .await
    }

    async fn run(self) {
        match self.give_back().await {
            Ok(()) => metrics::counter!(REFUNDS).increment(1),
            // The request stays counted: the safe side of a limit.
            Err(error) => {
                tracing::warn!(%error, key = %self.key, "a request could not be given back")
            }
        }
    }
}
