//! A steady load on one key while a test changes the deployment under it
//! (a failover, a slot migration): tasks checking in a loop, counting
//! checks and admissions, stopping at the first error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use limiter_core::{Key, Policy, Store};
use tokio::task::JoinSet;

/// Tasks checking one key in a loop, a millisecond apart.
#[derive(Debug)]
pub struct SteadyLoad {
    allowed: Arc<AtomicUsize>,
    checks: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    tasks: JoinSet<Result<(), String>>,
}

/// What a load did, once stopped.
#[derive(Debug)]
pub struct LoadOutcome {
    /// Checks made (the failed one included).
    pub checks: usize,
    /// Checks allowed.
    pub allowed: usize,
    /// Each task's end: the error that stopped it, if any.
    pub tasks: Vec<Result<(), String>>,
}

impl SteadyLoad {
    /// `tasks` tasks checking `key` under `policy` on `store`.
    pub fn start<S: Store + Clone>(
        store: S,
        key: &'static str,
        policy: &Policy,
        tasks: usize,
    ) -> Self {
        let allowed = Arc::new(AtomicUsize::new(0));
        let checks = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut set = JoinSet::new();
        for _ in 0..tasks {
            let (store, policy) = (store.clone(), policy.clone());
            let (allowed, checks, stop) = (allowed.clone(), checks.clone(), stop.clone());
            set.spawn(async move {
                let key = Key::from(key);
                while !stop.load(Ordering::SeqCst) {
                    let decision = store.check(&key, &policy, 1).await;
                    checks.fetch_add(1, Ordering::SeqCst);
                    match decision {
                        Ok(d) => allowed.fetch_add(usize::from(d.allowed()), Ordering::SeqCst),
                        Err(error) => {
                            stop.store(true, Ordering::SeqCst);
                            return Err(error.to_string());
                        }
                    };
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok(())
            });
        }
        Self {
            allowed,
            checks,
            stop,
            tasks: set,
        }
    }

    /// Waits for `count` more checks, failing (not hanging) if the load
    /// stops or makes no progress for 30 s.
    pub async fn checked(&self, count: usize) {
        let target = self.checks.load(Ordering::SeqCst) + count;
        for _ in 0..6_000 {
            if self.checks.load(Ordering::SeqCst) >= target || self.stop.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the load made no progress for 30 s");
    }

    /// Stops the tasks and says what they did.
    pub async fn stop(self) -> LoadOutcome {
        self.stop.store(true, Ordering::SeqCst);
        let tasks = self.tasks.join_all().await;
        LoadOutcome {
            checks: self.checks.load(Ordering::SeqCst),
            allowed: self.allowed.load(Ordering::SeqCst),
            tasks,
        }
    }
}
