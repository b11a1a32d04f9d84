//! Plans: named policies a request's limit is taken from (an API key's
//! plan), changed while the service runs.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::{Algorithm, ConfigError, Policy};

/// The longest plan name.
const MAX_NAME_LEN: usize = 64;

/// A named policy: what the requests of one plan (`free`, `pro`) are held to.
///
/// Its `RateLimit` items are named after the plan and the policy's rules:
/// `pro:100-per-60s`. A plan may also be [`unlimited`](Self::unlimited).
/// Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Plan, Policy, Rule};
///
/// let pro = Plan::new("pro", Policy::sliding_log([Rule::new(100, Duration::from_secs(60))?])?)?;
/// assert_eq!(pro.names(), ["pro:100-per-60s"]);
/// assert!(Plan::new("pro plan", pro.policy().unwrap().clone()).is_err());
/// # Ok::<(), limiter_core::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Plan {
    inner: Arc<PlanInner>,
}

#[derive(PartialEq, Eq)]
struct PlanInner {
    name: Box<str>,
    policy: Option<Policy>,
    names: Box<[String]>,
}

impl Plan {
    /// The plan `name`, held to `policy`. The name is 1 to 64 ASCII
    /// letters, digits, `-`, `_` or `.`.
    pub fn new(name: &str, policy: Policy) -> Result<Self, ConfigError> {
        validate_name(name)?;
        let names = policy
            .names()
            .into_iter()
            .map(|rule| format!("{name}:{rule}"))
            .collect();
        Ok(Self {
            inner: Arc::new(PlanInner {
                name: name.into(),
                policy: Some(policy),
                names,
            }),
        })
    }

    /// The plan `name`, not limited at all: its requests are neither
    /// checked nor counted, and carry no `RateLimit` fields.
    pub fn unlimited(name: &str) -> Result<Self, ConfigError> {
        validate_name(name)?;
        Ok(Self {
            inner: Arc::new(PlanInner {
                name: name.into(),
                policy: None,
                names: Box::default(),
            }),
        })
    }

    /// The plan's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The policy; `None` for an unlimited plan.
    pub fn policy(&self) -> Option<&Policy> {
        self.inner.policy.as_ref()
    }

    /// The name of each `RateLimit` item, in the order of the policy's
    /// rules: `{plan}:{rule}`, as `pro:100-per-60s` (see [`Policy::names`]).
    pub fn names(&self) -> &[String] {
        &self.inner.names
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("name", &self.inner.name)
            .field("names", &self.inner.names)
            .finish_non_exhaustive()
    }
}

fn validate_name(name: &str) -> Result<(), ConfigError> {
    let valid = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.bytes().all(valid) {
        return Err(ConfigError::PlanName { name: name.into() });
    }
    Ok(())
}

/// A set of plans that changes while the service runs: a request's policy
/// is looked up by its plan's name (the plan of its API key), and the set is
/// replaced, or one plan changed, atomically. Clones share the set: a clone
/// is the handle an admin endpoint changes the plans through.
///
/// # What a key keeps when its limit changes
/// A key names the route and the identity, not the plan, so when a key's
/// plan changes (or its plan's policy does) its state carries over, and the
/// new policy applies at once to what was already counted:
/// - a sliding log's entries count against the new rules, so lowering a
///   limit admits nothing more in the current window than the new limit
///   allows. The log keeps the entries of the longest window of the policy
///   it was last checked with: a policy with a longer window counts only
///   those;
/// - a fixed window's count counts against the new limit; the window keeps
///   its start and ends after the new length;
/// - a sliding window's counts count against the new limit (every plan's
///   sliding window has one length: its counters are per window);
/// - a bucket's or GCRA's water is carried in requests: the requests it
///   holds stay counted, a request partly drained counted whole, and a
///   bucket made smaller than its water is full. The water then drains at
///   the new rate.
///
/// So every limited plan of a set (and every default policy checked with
/// [`fits`](Self::fits)) runs one algorithm, and sliding windows of one
/// length; a set or a plan that would break this is refused, now and at
/// every later change.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Limiter, MemoryStore, Plan, Plans, Policy, Rule};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let per_minute = |n| Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]);
/// let plans = Plans::new([Plan::new("free", per_minute(10)?)?, Plan::new("pro", per_minute(100)?)?])?;
/// let limiter = Limiter::new(MemoryStore::new());
/// let pro = plans.get("pro").unwrap();
/// for _ in 0..50 {
///     assert!(limiter.check("key-1:search", pro.policy().unwrap()).await?.allowed());
/// }
/// // Pro becomes 20 a minute while the service runs: the 50 already counted
/// // count against it.
/// plans.insert(Plan::new("pro", per_minute(20)?)?)?;
/// let pro = plans.get("pro").unwrap();
/// let denied = limiter.check("key-1:search", pro.policy().unwrap()).await?;
/// assert!(!denied.allowed());
/// assert_eq!(pro.names(), ["pro:20-per-60s"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Plans {
    current: Arc<ArcSwap<PlanSet>>,
}

struct PlanSet {
    plans: Box<[Plan]>,
    /// What every limited plan runs, once one has been seen.
    shape: Option<Shape>,
}

/// What a key's state is made of: the algorithm, and a sliding window's
/// length (its counters are per window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Algorithm(Algorithm),
    SlidingWindow { window_us: u64 },
}

impl Shape {
    fn of(policy: &Policy) -> Self {
        match policy.algorithm() {
            Algorithm::SlidingWindow => Self::SlidingWindow {
                window_us: policy.rules()[0].window_us(),
            },
            algorithm => Self::Algorithm(algorithm),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Algorithm(algorithm) => write!(f, "{algorithm}"),
            Self::SlidingWindow { window_us } => write!(
                f,
                "sliding_window over {}",
                limiter_model::Span(std::time::Duration::from_micros(*window_us))
            ),
        }
    }
}

impl PlanSet {
    /// The set of `plans`, whose limited plans must have `shape` (or one
    /// shape, when it is `None`).
    fn new(plans: Vec<Plan>, mut shape: Option<Shape>) -> Result<Self, ConfigError> {
        if plans.is_empty() {
            return Err(ConfigError::NoPlans);
        }
        for (i, plan) in plans.iter().enumerate() {
            if plans[..i].iter().any(|p| p.name() == plan.name()) {
                return Err(ConfigError::DuplicatePlan {
                    name: plan.name().into(),
                });
            }
            if let Some(policy) = plan.policy() {
                shape = Some(fit(shape, policy, plan.name())?);
            }
        }
        Ok(Self {
            plans: plans.into_boxed_slice(),
            shape,
        })
    }
}

/// Whether a key checked by `from` keeps its state when checked by `to`;
/// else what `to` runs and what `from` does, as text.
pub(crate) fn same_shape(from: &Policy, to: &Policy) -> Result<(), (String, String)> {
    let (expected, found) = (Shape::of(from), Shape::of(to));
    if expected == found {
        return Ok(());
    }
    Err((found.to_string(), expected.to_string()))
}

/// The shape `policy` (of `what`) has, if it is `expected`'s.
fn fit(expected: Option<Shape>, policy: &Policy, what: &str) -> Result<Shape, ConfigError> {
    let found = Shape::of(policy);
    match expected {
        Some(expected) if expected != found => Err(ConfigError::PlansDiffer {
            plan: what.into(),
            found: found.to_string(),
            expected: expected.to_string(),
        }),
        _ => Ok(found),
    }
}

impl Plans {
    /// A set of `plans`: at least one, each name once.
    pub fn new(plans: impl IntoIterator<Item = Plan>) -> Result<Self, ConfigError> {
        let set = PlanSet::new(plans.into_iter().collect(), None)?;
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(set)),
        })
    }

    /// The plan named `name`, as the set holds it now.
    pub fn get(&self, name: &str) -> Option<Plan> {
        let set = self.current.load();
        set.plans.iter().find(|p| p.name() == name).cloned()
    }

    /// Every plan, as the set holds them now.
    pub fn all(&self) -> Vec<Plan> {
        self.current.load().plans.to_vec()
    }

    /// Replaces every plan at once. Requests already checked keep their
    /// decisions; every check from now on sees the new set. Refused, and
    /// nothing changes, when the new set breaks the rules of
    /// [`Plans::new`] or runs another algorithm than the plans before.
    pub fn replace(&self, plans: impl IntoIterator<Item = Plan>) -> Result<(), ConfigError> {
        let plans: Vec<Plan> = plans.into_iter().collect();
        let mut refused = None;
        self.current
            .rcu(|current| match PlanSet::new(plans.clone(), current.shape) {
                Ok(set) => Arc::new(set),
                Err(error) => {
                    refused = Some(error);
                    Arc::clone(current)
                }
            });
        refused.map_or(Ok(()), Err)
    }

    /// Adds `plan`, or changes the plan of its name; answers the plan it
    /// replaced. Refused, and nothing changes, when its policy runs another
    /// algorithm than the plans before.
    pub fn insert(&self, plan: Plan) -> Result<Option<Plan>, ConfigError> {
        let mut outcome = Ok(None);
        self.current.rcu(|current| {
            let mut plans = current.plans.to_vec();
            let replaced = match plans.iter_mut().find(|p| p.name() == plan.name()) {
                Some(slot) => Some(std::mem::replace(slot, plan.clone())),
                None => {
                    plans.push(plan.clone());
                    None
                }
            };
            match PlanSet::new(plans, current.shape) {
                Ok(set) => {
                    outcome = Ok(replaced);
                    Arc::new(set)
                }
                Err(error) => {
                    outcome = Err(error);
                    Arc::clone(current)
                }
            }
        });
        outcome
    }

    /// Checks that a key's state carries between `policy` (the default
    /// policy of a route whose requests may have a plan) and every plan,
    /// now and after any later change: a set that has no limited plan yet
    /// takes `policy`'s algorithm as the one its plans must run.
    pub fn fits(&self, policy: &Policy) -> Result<(), ConfigError> {
        let mut outcome = Ok(());
        self.current
            .rcu(|current| match fit(current.shape, policy, "default") {
                Ok(shape) if current.shape.is_none() => {
                    outcome = Ok(());
                    Arc::new(PlanSet {
                        plans: current.plans.clone(),
                        shape: Some(shape),
                    })
                }
                Ok(_) => {
                    outcome = Ok(());
                    Arc::clone(current)
                }
                Err(error) => {
                    outcome = Err(error);
                    Arc::clone(current)
                }
            });
        outcome
    }
}

impl fmt::Debug for Plans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = self.current.load();
        f.debug_struct("Plans")
            .field("plans", &set.plans)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Rate, Rule};

    fn log(limit: u64) -> Policy {
        Policy::sliding_log([Rule::new(limit, Duration::from_secs(60)).unwrap()]).unwrap()
    }

    #[test]
    fn plans_of_one_set_share_what_a_key_keeps() {
        let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 10).unwrap();
        let err = Plans::new([
            Plan::new("free", log(10)).unwrap(),
            Plan::new("pro", bucket.clone()).unwrap(),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the plan \"pro\" runs token_bucket, but its key's state is kept for sliding_log: \
             every plan a key can have (and the default policy) runs one algorithm, \
             sliding windows of one length"
        );
        let window =
            |secs| Policy::sliding_window(Rule::new(10, Duration::from_secs(secs)).unwrap());
        let plans = Plans::new([Plan::new("free", window(60)).unwrap()]).unwrap();
        let err = plans
            .insert(Plan::new("pro", window(3600)).unwrap())
            .unwrap_err();
        assert!(
            err.to_string().contains("runs sliding_window over 1h")
                && err.to_string().contains("kept for sliding_window over 60s"),
            "{err}"
        );
        assert!(
            plans.get("pro").is_none(),
            "a refused change changes nothing"
        );
        assert_eq!(
            Plans::new([
                Plan::new("a", log(1)).unwrap(),
                Plan::new("a", log(2)).unwrap()
            ])
            .unwrap_err(),
            ConfigError::DuplicatePlan { name: "a".into() }
        );
        assert_eq!(Plans::new([]).unwrap_err(), ConfigError::NoPlans);
    }

    #[test]
    fn an_unlimited_plan_fits_any_set_and_the_first_policy_sets_the_algorithm() {
        let plans = Plans::new([Plan::unlimited("internal").unwrap()]).unwrap();
        plans.fits(&log(5)).unwrap();
        let bucket = Policy::gcra(Rate::per_second(1).unwrap(), 3).unwrap();
        assert!(
            plans
                .insert(Plan::new("pro", bucket.clone()).unwrap())
                .is_err()
        );
        assert_eq!(plans.insert(Plan::new("pro", log(50)).unwrap()), Ok(None));
        assert!(plans.fits(&bucket).is_err());
        assert_eq!(plans.get("internal").unwrap().names(), [] as [String; 0]);
        let replaced = plans.insert(Plan::new("pro", log(20)).unwrap()).unwrap();
        assert_eq!(replaced.unwrap().names(), ["pro:50-per-60s"]);
        assert!(plans.replace([Plan::new("free", bucket).unwrap()]).is_err());
        plans.replace([Plan::new("free", log(1)).unwrap()]).unwrap();
        assert_eq!(plans.all().len(), 1);
    }

    #[test]
    fn plan_names_are_tokens() {
        for bad in ["", "pro plan", "pro:x", "\"pro\"", &"p".repeat(65)] {
            assert_eq!(
                Plan::unlimited(bad).unwrap_err(),
                ConfigError::PlanName { name: bad.into() }
            );
        }
        assert!(Plan::unlimited("pro-2024_v1.0").is_ok());
    }
}
