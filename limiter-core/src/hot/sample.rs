//! Sampling a hot key: an instance checks one request in `k` at `k` times
//! its cost, and decides the next `k - 1` as that one was decided.
//!
//! The bound: the store counts every sampled request for itself and for the
//! `k - 1` after it, in advance. Requests decided by a sample of an earlier
//! window are the only ones no window counts, and an instance holds at most
//! `k - 1` of them at a time: at most `k - 1` extra per instance and
//! window. (It also counts requests that never come: a key that goes quiet
//! was charged for up to `k - 1` of them.)

use std::sync::{Arc, Mutex};

use hashbrown::HashMap;

use crate::decision::Decision;
use crate::error::Error;
use crate::guard::{OnStoreError, Verdict};
use crate::policy::Policy;
use crate::store::Store;

use super::engine::{HotKeys, MAX_TRACKED_KEYS};

#[derive(Default)]
pub(crate) struct Samples {
    keys: Mutex<HashMap<Box<str>, Sampled, foldhash::fast::RandomState>>,
}

/// The last sample of a key and the requests it still decides.
#[derive(Clone, Copy)]
struct Sampled {
    left: u32,
    verdict: Verdict,
    /// A denial holds until then (its retry time).
    until: u64,
}

pub(super) async fn check<S: Store>(
    hot: &HotKeys,
    store: &Arc<S>,
    key: &str,
    policy: &Policy,
    every: u32,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Result<Verdict, Error> {
    policy.validate_cost(cost)?;
    let weight = cost * u64::from(every);
    policy.validate_cost(weight)?;
    let samples = &hot.shared.samples;
    let now = hot.shared.clock.now();
    if let Some(verdict) = samples.skip(key, now) {
        metrics::counter!("limiter_sampled_skips_total").increment(1);
        return Ok(verdict);
    }
    let verdict = store.check_verdict(key, policy, weight, on_error).await?;
    let until = verdict
        .decision()
        .and_then(Decision::retry_after)
        .map_or(u64::MAX, |wait| now + wait.as_micros() as u64);
    samples.record(key, every - 1, verdict, until);
    Ok(verdict)
}

impl Samples {
    /// The verdict of the key's last sample, when it still decides this request.
    fn skip(&self, key: &str, now: u64) -> Option<Verdict> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let sampled = keys.get_mut(key)?;
        let denial_over = !sampled.verdict.allowed() && now >= sampled.until;
        if sampled.left == 0 || denial_over {
            return None;
        }
        sampled.left -= 1;
        Some(sampled.verdict)
    }

    /// Records a sample. Never more than `every - 1` requests wait to be
    /// decided by samples (concurrent samples do not add up), which keeps
    /// the bound.
    fn record(&self, key: &str, left: u32, verdict: Verdict, until: u64) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if keys.len() >= MAX_TRACKED_KEYS && !keys.contains_key(key) {
            // Forgetting a sample only costs the calls it would have saved.
            keys.retain(|_, sampled| sampled.left > 0 && sampled.verdict.allowed());
            if keys.len() >= MAX_TRACKED_KEYS {
                return;
            }
        }
        keys.insert(
            key.into(),
            Sampled {
                left,
                verdict,
                until,
            },
        );
    }
}
