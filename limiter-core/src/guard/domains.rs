//! A circuit breaker per failure domain of the store (see
//! [`Capabilities::failure_domain`](crate::Capabilities::failure_domain)): on a Redis
//! Cluster, one per node, so that a dead master opens the breaker of its own
//! keys only, and failures on it never count against the others.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::breaker::{Breaker, BreakerConfig};
use crate::clock::Clock;

/// Node breakers kept at most; past it, closed ones that no call holds go.
const MAX_NODES: usize = 1_024;

pub(crate) struct Breakers<C> {
    /// Domain 0: the whole store, for a store that fails as a whole (and a
    /// cluster's keys before its slots are known). No map lookup.
    whole: Breaker<C>,
    nodes: RwLock<HashMap<u64, Arc<Breaker<C>>>>,
    config: BreakerConfig,
    probe_lease: Duration,
    clock: C,
}

/// The breaker of one call's domain.
pub(crate) enum BreakerRef<'a, C> {
    Whole(&'a Breaker<C>),
    Node(Arc<Breaker<C>>),
}

impl<C> Deref for BreakerRef<'_, C> {
    type Target = Breaker<C>;

    fn deref(&self) -> &Breaker<C> {
        match self {
            Self::Whole(breaker) => breaker,
            Self::Node(breaker) => breaker,
        }
    }
}

impl<C: Clock + Clone> Breakers<C> {
    pub(crate) fn new(config: BreakerConfig, probe_lease: Duration, clock: C) -> Self {
        Self {
            whole: Breaker::new(config, probe_lease, clock.clone(), None),
            nodes: RwLock::new(HashMap::new()),
            config,
            probe_lease,
            clock,
        }
    }

    /// The breaker of the whole store.
    pub(crate) fn whole(&self) -> &Breaker<C> {
        &self.whole
    }

    /// The breaker of `domain`, made closed on first use and named by `name`.
    pub(crate) fn get(&self, domain: u64, name: impl FnOnce() -> String) -> BreakerRef<'_, C> {
        if domain == 0 {
            return BreakerRef::Whole(&self.whole);
        }
        let read = self.nodes.read().unwrap_or_else(|p| p.into_inner());
        if let Some(breaker) = read.get(&domain) {
            return BreakerRef::Node(Arc::clone(breaker));
        }
        drop(read);
        let mut nodes = self.nodes.write().unwrap_or_else(|p| p.into_inner());
        if nodes.len() >= MAX_NODES {
            nodes.retain(|_, b| Arc::strong_count(b) > 1 || !b.is_closed());
        }
        let breaker = nodes.entry(domain).or_insert_with(|| {
            Arc::new(Breaker::new(
                self.config,
                self.probe_lease,
                self.clock.clone(),
                Some(name()),
            ))
        });
        BreakerRef::Node(Arc::clone(breaker))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use crate::{
        BreakerState, Capabilities, Decision, Error, GuardConfig, Guarded, Key, ManualClock,
        MemoryStore, OnStoreError, Policy, Rule, Store, Verdict,
    };

    /// Two nodes: keys starting with `a` are on node 1, which is down; the
    /// others on node 2, which answers.
    #[derive(Debug)]
    struct TwoNodes {
        up: MemoryStore<ManualClock>,
        calls_to_the_dead_node: AtomicUsize,
    }

    impl Store for TwoNodes {
        async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
            if self.failure_domain(key) == 1 {
                self.calls_to_the_dead_node.fetch_add(1, Ordering::SeqCst);
                return Err(Error::Protocol("node 1 is down".into()));
            }
            self.up.check(key, policy, cost).await
        }
    }

    impl Capabilities for TwoNodes {
        fn failure_domain(&self, key: &Key) -> u64 {
            if key.as_str().starts_with('a') { 1 } else { 2 }
        }

        fn failure_domain_name(&self, domain: u64) -> String {
            format!("node-{domain}")
        }
    }

    #[test]
    fn a_dead_node_opens_its_own_breaker_and_no_other() {
        let clock = ManualClock::new(std::time::Duration::from_secs(1_000));
        let store = TwoNodes {
            up: MemoryStore::with_clock(clock.clone()),
            calls_to_the_dead_node: AtomicUsize::new(0),
        };
        let guarded = Guarded::with_clock(store, GuardConfig::default(), clock);
        let policy =
            Policy::sliding_log([Rule::new(1_000, std::time::Duration::from_secs(60)).unwrap()])
                .unwrap();
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let verdicts = metrics::with_local_recorder(&recorder, || {
            runtime.block_on(async {
                let mut verdicts = Vec::new();
                for i in 0..10 {
                    for key in [format!("a{i}"), format!("b{i}")].map(Key::from) {
                        let verdict = guarded
                            .check_with(&key, &policy, 1, OnStoreError::default())
                            .await
                            .unwrap();
                        verdicts.push(verdict);
                    }
                }
                verdicts
            })
        });
        let (dead, alive): (Vec<_>, Vec<_>) =
            verdicts.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        assert!(dead.iter().all(|(_, v)| matches!(v, Verdict::Fallback(_))));
        assert!(alive.iter().all(|(_, v)| matches!(v, Verdict::Store(_))));
        // Three failures opened node 1's breaker; node 2's successes never
        // reset its count, nor did its calls skip.
        assert_eq!(
            guarded
                .store()
                .calls_to_the_dead_node
                .load(Ordering::SeqCst),
            3
        );
        assert_eq!(guarded.breaker_state_of("a0"), BreakerState::Open);
        assert_eq!(guarded.breaker_state_of("b0"), BreakerState::Closed);
        assert_eq!(guarded.breaker_state(), BreakerState::Closed);

        let mut gauges: Vec<(String, f64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == "limiter_breaker_state")
            .filter_map(|(key, _, _, value)| {
                let node = key.key().labels().find(|l| l.key() == "node")?;
                let DebugValue::Gauge(value) = value else {
                    return None;
                };
                Some((node.value().to_owned(), value.into_inner()))
            })
            .collect();
        gauges.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            gauges,
            [("node-1".to_owned(), 1.0), ("node-2".to_owned(), 0.0)]
        );
    }
}
