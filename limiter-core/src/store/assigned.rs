//! Which plan each key has, shared by the instances of a store
//! ([`SharedControl`](super::SharedControl)), and the local copy a
//! store answers from without a call ([`AssignedPlans`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The most keys given a plan: past it, a plan for a new key is refused
/// (keys given the default plan are not held).
pub const MAX_ASSIGNED_PLANS: usize = 100_000;

/// Keys and the name of the plan each has: what a store answers
/// [`ControlTables::assigned_plan`](crate::ControlTables::assigned_plan)
/// from. A key not held has the default plan.
#[derive(Debug, Default)]
pub struct AssignedPlans {
    plans: RwLock<HashMap<Box<str>, Arc<str>>>,
}

impl AssignedPlans {
    /// An empty table: every key on the default plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives `key` the plan `plan`, or the default (`None`: not held).
    /// Refuses a new key when [`MAX_ASSIGNED_PLANS`] are held.
    pub fn assign(&self, key: &str, plan: Option<&str>) -> Result<(), crate::Error> {
        let mut plans = self.plans.write().unwrap_or_else(|p| p.into_inner());
        match plan {
            None => {
                plans.remove(key);
            }
            Some(plan) => {
                if plans.len() >= MAX_ASSIGNED_PLANS && !plans.contains_key(key) {
                    return Err(crate::Error::Protocol(format!(
                        "{MAX_ASSIGNED_PLANS} keys have a plan already"
                    )));
                }
                plans.insert(key.into(), plan.into());
            }
        }
        Ok(())
    }

    /// Replaces every assignment with `assignments` (key, plan).
    pub fn replace(&self, assignments: impl IntoIterator<Item = (String, String)>) {
        let mut plans = self.plans.write().unwrap_or_else(|p| p.into_inner());
        plans.clear();
        for (key, plan) in assignments.into_iter().take(MAX_ASSIGNED_PLANS) {
            plans.insert(key.into_boxed_str(), plan.into());
        }
    }

    /// The plan of `key`; `None` for the default.
    pub fn get(&self, key: &str) -> Option<Arc<str>> {
        let plans = self.plans.read().unwrap_or_else(|p| p.into_inner());
        plans.get(key).cloned()
    }

    /// How many keys have a plan other than the default.
    pub fn len(&self) -> usize {
        self.plans.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether every key has the default plan.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
