//! Sampling a hot key: an instance checks one request in `k` at `k` times
//! its cost, and decides the next `k - 1` as that one was decided.
//!
//! The bound: the store counts every sample for itself and for the `k - 1`
//! requests after it, in advance; only requests decided by a sample the
//! store counted in an earlier window escape a window's count. An instance
//! has one sample of a key under way at a time, and starts one only when
//! the last has decided all its requests, so at most `k - 1` requests wait
//! to be decided by samples already counted: at most `k - 1` extra per
//! instance and window. (A key that goes quiet was charged for up to
//! `k - 1` requests that never came.)

use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashMap;
use tokio::sync::{Notify, oneshot};

use crate::store::Store;
use crate::{Decision, Error, Key, Policy, Verdict};

use super::state::{Instance, MAX_TRACKED_KEYS, SweepGate};

/// Samples a request waits for before it is checked on its own, unsampled.
const MAX_ROUNDS: usize = 64;

#[derive(Default)]
pub(crate) struct Samples {
    keys: Mutex<HashMap<Box<str>, Sampled, foldhash::fast::RandomState>>,
    sweep: SweepGate,
}

/// A key's last sample, the requests it still decides, the one under way.
#[derive(Default)]
struct Sampled {
    left: u32,
    verdict: Option<Verdict>,
    /// A denial holds until then (its retry time).
    until: u64,
    sampling: Option<Arc<Notify>>,
}

enum Step {
    Decided(Verdict),
    Wait(Arc<Notify>),
    Sample(Arc<Notify>),
    Unsampled,
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn check<S: Store>(
    hot: &Instance,
    samples: &Arc<Samples>,
    store: &Arc<S>,
    key: &Key,
    policy: &Policy,
    every: u32,
    cost: u64,
) -> Result<Verdict, Error> {
    policy.validate_cost(cost)?;
    let weight = cost * u64::from(every);
    policy.validate_cost(weight)?;
    for _ in 0..MAX_ROUNDS {
        let now = hot.clock.now();
        let (notify, sampler) = match samples.step(key.as_str(), now) {
            Step::Decided(verdict) => {
                metrics::counter!("limiter_sampled_skips_total").increment(1);
                return Ok(verdict);
            }
            Step::Unsampled => break,
            Step::Wait(notify) => (notify, false),
            Step::Sample(notify) => (notify, true),
        };
        if sampler {
            // In a task of its own, so that a caller who gives up leaves no
            // sample half-taken: the others wait for it.
            let (sent, answer) = oneshot::channel();
            let (samples, store) = (Arc::clone(samples), Arc::clone(store));
            let (key, policy) = (key.clone(), policy.clone());
            tokio::spawn(async move {
                let outcome = super::verdict_of(&*store, &key, &policy, weight).await;
                samples.record(key.as_str(), every - 1, outcome.as_ref().ok().copied(), now);
                notify.notify_waiters();
                let _ = sent.send(outcome);
            });
            return answer
                .await
                .unwrap_or_else(|_| Err(Error::Protocol("the sample's task ended".into())));
        }
        let waiting = Arc::clone(&notify).notified_owned();
        let mut waiting = std::pin::pin!(waiting);
        waiting.as_mut().enable();
        if samples.is_sampling(key.as_str(), &notify) {
            waiting.await;
        }
    }
    // Never decided by a sample: checked at its own cost, exactly.
    super::verdict_of(&**store, key, policy, cost).await
}

impl Samples {
    fn step(&self, key: &str, now: u64) -> Step {
        let mut keys = self.lock();
        if keys.len() >= MAX_TRACKED_KEYS && !keys.contains_key(key) {
            // Forgetting a sample only costs the calls it would have saved.
            if self.sweep.due(now) {
                keys.retain(|_, s| s.sampling.is_some() || s.left > 0);
            }
            if keys.len() >= MAX_TRACKED_KEYS {
                return Step::Unsampled;
            }
        }
        let sampled = keys.entry_ref(key).or_default();
        let (left, until) = (sampled.left, sampled.until);
        if let Some(verdict) = sampled
            .verdict
            .filter(|v| left > 0 && (v.allowed() || now < until))
        {
            sampled.left -= 1;
            return Step::Decided(verdict);
        }
        if let Some(notify) = &sampled.sampling {
            return Step::Wait(Arc::clone(notify));
        }
        let notify = Arc::new(Notify::new());
        sampled.sampling = Some(Arc::clone(&notify));
        Step::Sample(notify)
    }

    /// Forgets the key's last sample (its state was reset): a sample under
    /// way records nothing, and the next request samples afresh.
    /// Forgets every key (notices of resets may have been missed).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    pub(crate) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    fn is_sampling(&self, key: &str, notify: &Arc<Notify>) -> bool {
        self.lock()
            .get(key)
            .and_then(|s| s.sampling.as_ref())
            .is_some_and(|sampling| Arc::ptr_eq(sampling, notify))
    }

    /// Records a sample's verdict (none when the store failed): it decides
    /// the next `left` requests.
    fn record(&self, key: &str, left: u32, verdict: Option<Verdict>, now: u64) {
        let mut keys = self.lock();
        let Some(sampled) = keys.get_mut(key) else {
            return;
        };
        sampled.sampling = None;
        sampled.left = if verdict.is_some() { left } else { 0 };
        sampled.verdict = verdict;
        sampled.until = verdict
            .as_ref()
            .and_then(Verdict::decision)
            .and_then(Decision::retry_after)
            .map_or(u64::MAX, |wait| now + wait.as_micros() as u64);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Box<str>, Sampled, foldhash::fast::RandomState>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }
}
