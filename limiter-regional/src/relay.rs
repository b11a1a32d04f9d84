//! Relays: what a store sends to the other regions in the background (a
//! denial, a block a penalty earned), each a task, bounded in number.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::inner::Inner;
use super::stats::bump;
use super::store::RegionalStore;

/// How many relays (a denial, or a block a penalty earned, on its way to
/// every other region) one store keeps under way at most. Each holds its
/// key and penalty until every other region has answered, within the
/// peer deadline per call; past this many, a new one is dropped (counted
/// in [`RegionStats::relays_dropped`](crate::RegionStats::relays_dropped)
/// and `limiter_region_relays_dropped_total`), so a flood of denials costs
/// bounded memory and tasks.
pub const MAX_RELAYS_IN_FLIGHT: usize = 1_024;

/// A relay under way, counted until it is dropped (its task ended, or it
/// was never spawned).
struct UnderWay(Arc<Inner>);

impl Drop for UnderWay {
    fn drop(&mut self) {
        let relays = &self.0.relays;
        if relays.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            relays.idle.notify_waiters();
        }
    }
}

/// Runs `work` in the background, unless [`MAX_RELAYS_IN_FLIGHT`]
/// relays are under way (or there is no runtime): then it is dropped,
/// and counted.
pub(crate) fn relay<F>(store: &RegionalStore, work: impl FnOnce(Arc<Inner>) -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let inner = &store.inner;
    let runtime = tokio::runtime::Handle::try_current();
    let taken = inner.relays.in_flight.fetch_add(1, Ordering::AcqRel);
    let under_way = UnderWay(Arc::clone(inner));
    let Some(runtime) = runtime.ok().filter(|_| taken < MAX_RELAYS_IN_FLIGHT) else {
        bump(&inner.stats.relays_dropped);
        metrics::counter!("limiter_region_relays_dropped_total").increment(1);
        return;
    };
    let work = work(Arc::clone(inner));
    runtime.spawn(async move {
        work.await;
        bump(&under_way.0.stats.relays);
        drop(under_way);
    });
}
