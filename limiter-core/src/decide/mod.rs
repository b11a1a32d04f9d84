//! How a named limit decides, top to bottom. Every check of a limit takes
//! these steps in this order, wherever it is made: a request on its route
//! (limiter-tower's route layer, which the `#[rate_limit]` attribute
//! generates), or a check made without a request, in a handler or a
//! program ([`NamedLimit::check`], which limiter-tower's `Control::attempt_on`
//! and `check_on` call).
//!
//! 1. **Lists.** A deny list refuses the identity, an allow list lets it
//!    through unchecked ([`Listed`]). The entry point matches them, as the
//!    lists hold client addresses as well as identities.
//! 2. **The key**, built once by the entry point ([`Key`]): the limit's
//!    name and the identity's kind and value.
//! 3. **The identity's block** ([`Shared::blocked`]), or its client
//!    address's.
//! 4. **The policy in force** ([`NamedLimit::in_force`], then
//!    [`NamedLimit::rules`]): a live override (its rules, shadow mode, or the
//!    limit switched off), else the request's plan, else the compiled
//!    rules; shadow mode by the limit's setting, its layer's, or the
//!    override's.
//! 5. **The store, under the failure policy**: at once when the store
//!    decides at once ([`LimitStore::check_now`]), else [`admit`]: the
//!    permit, waiting, the rate check, the penalty a denial earns, and the
//!    receipt that gives a request counted by outcome back ([`Refund`]).
//! 6. **The outcome counted**: the decision in the limit's metrics
//!    ([`NamedLimit::record_as`]), a denial among the top offenders
//!    ([`Shared::record_denial`]), a denial shadow mode lets through in its
//!    own counter ([`NamedLimit::record_shadowed`]).
//!
//! The route layer adds only what HTTP needs around them: the identity
//! read from the request, a plan or cost a resolver reads from it, and the
//! answer (the inner call with the `RateLimit` fields, or the 429).

mod admission;
mod counters;
mod offenders;
mod store;
#[cfg(test)]
mod tests;

pub use admission::{Admission, Checks, Detached, Pending, Refund, admit};
pub use counters::{Counted, DecisionCounters, ShadowCounter};
pub use offenders::{
    DEFAULT_PUBLISH_EVERY, Offenders, PUBLISHED, board, default_instance, layer_instance, sanitized,
};
pub(crate) use store::unguarded;
pub use store::{BoxFuture, COUNTING, LimitStore, StoreBuilder, store_builder, tables_of};

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::{
    Attempt, ControlTables, Decision, Error, Identity, Key, OnStoreError, Override, OverrideMode,
    Penalty, Plan, Policy, Refused, Waiters, required,
};

/// What every limit under one layer shares: the store, its control tables,
/// the layer's failure policy, the queues of waiting checks and the top
/// offenders.
#[derive(Clone)]
pub struct Shared {
    /// The store, guarded when remote.
    pub store: Arc<dyn LimitStore>,
    /// The store's blocks, plans and overrides, read by every check
    /// without a call; `None` when the store keeps none.
    pub tables: Option<ControlTables>,
    /// The failure policy set on the layer, for limits that set none.
    pub on_store_error: Option<OnStoreError>,
    /// The key prefix followed by `:`, as every key starts.
    pub key_start: Box<str>,
    /// The queues of checks waiting for their retry time.
    pub waiters: Waiters,
    /// The identities each limit denied most, on this instance.
    pub offenders: Arc<Offenders>,
}

impl Shared {
    /// How long the block of `block_key` (`{prefix}:{identity}`) has left;
    /// `None` when it is not blocked.
    pub fn blocked(&self, block_key: &str) -> Option<Duration> {
        self.tables.as_ref()?.blocked(block_key)
    }

    /// The block of the identity a key no limit names starts with: the key
    /// up to its first `:` after the prefix (an identity escapes its own),
    /// as [`Identity::push_key`] and `:{action}` build it.
    pub fn block_of_key(&self, key: &Key) -> Option<Duration> {
        let tables = self.tables.as_ref()?;
        // An empty list costs one atomic load.
        if tables.blocks().is_empty() {
            return None;
        }
        tables.blocked(crate::identity_key_of(key.as_str(), self.key_start.len())?)
    }

    /// A check of `key` (under the prefix) that no limit names, recorded
    /// if allowed: the block of the identity it starts with, then the
    /// store under its guard's failure policy (at once when the store
    /// decides at once).
    pub async fn check_key(&self, key: Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        if let Some(left) = self.block_of_key(&key) {
            return Ok(Decision::blocked(policy, left));
        }
        if let Some(decided) = self.store.check_now(&key, policy, cost) {
            return decided;
        }
        let policy = Arc::new(policy.clone());
        let (verdict, _) = Arc::clone(&self.store)
            .check_owned(key, Arc::clone(&policy), cost, None)
            .await;
        verdict?.into_decision(&policy)
    }

    /// A check of `key` that no limit names, counting only if its outcome
    /// says so ([`check_key`](Self::check_key)'s steps): recorded now, and
    /// given back by [`Attempt::refund`].
    pub async fn attempt_key(&self, key: Key, policy: &Policy) -> Result<Attempt, Error> {
        let policy = Arc::new(policy.clone());
        if let Some(left) = self.block_of_key(&key) {
            return Ok(Attempt::refused(Refused::Blocked(left), policy));
        }
        let (decision, receipt) = required(self.store.capabilities().as_key_state(), COUNTING)?
            .check_refundable(&key, &policy, policy.cost())
            .await?;
        let attempt = Attempt::new(decision, Arc::clone(&policy));
        Ok(match receipt {
            Some(receipt) => attempt.giving_back(Box::new(Refund {
                store: Arc::clone(&self.store),
                key,
                policy,
                receipt,
            })),
            None => attempt,
        })
    }

    /// The key of the block of `key`'s identity: `{prefix}:{identity}`.
    pub fn block_key(&self, key: &Key) -> String {
        let mut block_key = String::from(&*self.key_start);
        block_key.push_str(key.identity_part().unwrap_or_default());
        block_key
    }

    /// Counts a denial of `identity` by the limit `limit` among its top
    /// offenders, and starts publishing them (once, when a runtime runs).
    pub fn record_denial(&self, limit: &str, identity: &Identity) {
        self.offenders.record(limit, identity);
        if self.offenders.starts_publishing() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(publish_offenders(
                    Arc::downgrade(&self.offenders),
                    Arc::clone(&self.store),
                    self.key_start.clone(),
                ))),
                Err(_) => self.offenders.stopped_publishing(),
            }
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("key_start", &self.key_start)
            .field("on_store_error", &self.on_store_error)
            .field("waiters", &self.waiters)
            .finish_non_exhaustive()
    }
}

/// Publishes each limit's counts through `store` every period, until the
/// layer is gone or the store keeps no reports; a failed publication is
/// logged and tried again the next period.
async fn publish_offenders(
    offenders: Weak<Offenders>,
    store: Arc<dyn LimitStore>,
    key_start: Box<str>,
) {
    let Some(every) = offenders.upgrade().map(|o| o.every()) else {
        return;
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(live) = offenders.upgrade() else {
            return;
        };
        let (instance, ttl, reports) = (live.instance(), live.ttl(), live.reports());
        drop(live);
        let Some(shared) = store.capabilities().as_shared_control() else {
            return;
        };
        // A limit that denied nobody for two sketch periods has nothing to
        // say; what it published last is read no longer than its time.
        for (limit, report) in reports.into_iter().filter(|(_, r)| r.counted > 0) {
            let board = board(&key_start, &limit);
            match (shared.publish_report(&board, &instance, &report.to_text(), ttl)).await {
                Ok(()) => {}
                Err(Error::Unsupported(_)) => return,
                Err(error) => {
                    tracing::debug!(%error, limit = &*limit, "top offenders not published")
                }
            }
        }
    }
}

/// A named limit as its checks are decided: its name, its compiled rules,
/// its failure policy, whether blocks deny it, and its counters.
#[derive(Debug, Clone)]
pub struct NamedLimit {
    /// The limit's name, escaped like an identity: the last part of its
    /// keys, and what overrides and top offenders take.
    pub name: Box<str>,
    /// The compiled rules.
    pub policy: Arc<Policy>,
    /// The limit's own failure policy; `None`: its layer's, else its
    /// store guard's.
    pub on_store_error: Option<OnStoreError>,
    /// Whether blocks deny this limit's checks.
    pub honours_blocks: bool,
    counters: DecisionCounters,
    shadow_counter: ShadowCounter,
}

/// What the next check of a limit meets before its plan: a live override
/// and its time left, and whether its denials are shadowed.
#[derive(Debug, Clone, Default)]
pub struct InForce {
    /// The live override holding, and its time left.
    pub overridden: Option<(Arc<Override>, Duration)>,
    /// Whether denials are counted and logged but not enforced.
    pub shadow: bool,
}

impl InForce {
    /// The override's mode, while one holds.
    pub fn mode(&self) -> Option<OverrideMode> {
        self.overridden.as_ref().map(|(found, _)| found.mode())
    }

    /// Whether the limit is checked at all: not while an override switches
    /// it off.
    pub fn checked(&self) -> bool {
        self.mode() != Some(OverrideMode::Off)
    }

    /// The override's rules, when it has some.
    pub fn override_rules(&self) -> Option<&Arc<Policy>> {
        self.overridden.as_ref()?.0.shared_policy()
    }
}

/// The rules a check is decided by.
#[derive(Debug)]
pub enum Rules {
    /// A live override's: an incident's rules hold whatever the plan.
    Override(Arc<Policy>),
    /// The request's plan's, named as the plan names them.
    Plan(Arc<Policy>, Box<[String]>),
    /// The compiled rules.
    Compiled,
    /// None: the request's plan has no limits.
    Unlimited,
}

/// Where an identity stands on the lists of the limit and its layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// On a deny list: refused without end.
    Denied,
    /// On an allow list: passes unchecked.
    Allowed,
}

/// A check made without a request, as [`NamedLimit::check`] takes it.
#[derive(Debug)]
pub struct Check<'a> {
    /// The key, built once.
    pub key: Key,
    /// Whose check it is.
    pub identity: &'a Identity,
    /// The key of the identity's block (see [`Shared::blocked`]).
    pub block_key: String,
    /// Where the identity stands on the lists; `None`: on none.
    pub listed: Option<Listed>,
    /// Shadow mode set on the limit or its layer.
    pub shadow: bool,
    /// The penalty the limit's denials earn.
    pub penalty: Option<Arc<Penalty>>,
    /// Recorded so that it can be given back ([`Checked::refund`]).
    pub refundable: bool,
}

/// A check made without a request, as the limit decided it.
#[derive(Debug)]
pub struct Checked {
    /// The decision.
    pub decision: Decision,
    /// The policy in force: a live override's, or the limit's own.
    pub policy: Arc<Policy>,
    /// The block's time left, when the identity is blocked.
    pub blocked: Option<Duration>,
    /// Whether a deny list refused the identity.
    pub deny_listed: bool,
    /// What gives the check back, when it was asked for and recorded.
    pub refund: Option<Box<Refund>>,
}

impl NamedLimit {
    /// The limit `name` (escaped like an identity) with the rules `policy`.
    pub fn new(name: &str, policy: Policy) -> Self {
        let mut escaped = String::new();
        crate::push_identity(&mut escaped, name);
        Self {
            name: escaped.into(),
            policy: Arc::new(policy),
            on_store_error: None,
            honours_blocks: true,
            counters: DecisionCounters::default(),
            shadow_counter: ShadowCounter::default(),
        }
    }

    /// Counts one answer of this limit's rate check.
    #[inline]
    pub fn record(&self, counted: Counted) {
        self.record_as(counted, false);
    }

    /// Counts one answer of this limit's rate check, apart when a live
    /// override decided it.
    #[inline]
    pub fn record_as(&self, counted: Counted, overridden: bool) {
        let algorithm = || self.policy.algorithm().name();
        self.counters
            .record(counted, algorithm, &self.name, overridden);
    }

    /// Counts a denial shadow mode let through.
    pub fn record_shadowed(&self) {
        self.shadow_counter
            .record(self.policy.algorithm().name(), &self.name);
    }

    /// Whether a live override may hold on this limit: the store holds
    /// some (one load when it holds none).
    #[inline]
    pub fn may_be_overridden(&self, shared: &Shared) -> bool {
        (shared.tables.as_ref()).is_some_and(|tables| !tables.overrides().is_empty())
    }

    /// Step 4's first half: the live override of this limit and its time
    /// left, and shadow mode (`shadow`: set on the limit or its layer).
    /// What every check of the limit, and a peek, takes first.
    pub fn in_force(&self, shared: &Shared, shadow: bool) -> InForce {
        let overridden = match self.may_be_overridden(shared) {
            true => (shared.tables.as_ref()).and_then(|tables| tables.override_of(&self.name)),
            false => None,
        };
        let mut in_force = InForce { overridden, shadow };
        in_force.shadow |= in_force.mode() == Some(OverrideMode::Shadow);
        in_force
    }

    /// Step 4's second half: the rules of a check under `in_force`, given
    /// the check's plan (`None` when it has none): an override's rules
    /// hold whatever the plan; a plan without limits checks nothing; a
    /// plan of another algorithm than the limit's is logged and the
    /// compiled rules apply, as a key's state carries only between
    /// policies of one algorithm.
    pub fn rules(&self, in_force: &InForce, plan: impl FnOnce() -> Option<Plan>) -> Rules {
        if let Some(policy) = in_force.override_rules() {
            return Rules::Override(Arc::clone(policy));
        }
        let Some(plan) = plan() else {
            return Rules::Compiled;
        };
        match plan.policy() {
            None => Rules::Unlimited,
            Some(found) if found.algorithm() != self.policy.algorithm() => {
                tracing::error!(
                    limit = %self.name,
                    plan = plan.name(),
                    "the plan runs {}, the limit {}: the limit's own policy applies",
                    found.algorithm(),
                    self.policy.algorithm()
                );
                Rules::Compiled
            }
            Some(found) => Rules::Plan(Arc::new(found.clone()), plan.names().into()),
        }
    }

    /// Decides a check made without a request, taking every step a request
    /// on the limit's route takes: the lists, the identity's block, the
    /// policy in force (a live override, else the compiled rules), the
    /// store under the failure policy, the penalty, the decision counters,
    /// the top offenders and shadow mode.
    pub async fn check(&self, shared: &Shared, check: Check<'_>) -> Result<Checked, Error> {
        let unchecked = |policy: Arc<Policy>, blocked| Checked {
            decision: match blocked {
                Some(left) => Decision::blocked(&policy, left),
                None => Decision::unchecked(&policy),
            },
            policy,
            blocked,
            deny_listed: false,
            refund: None,
        };
        let compiled = || Arc::clone(&self.policy);
        match check.listed {
            Some(Listed::Denied) => {
                self.record(Counted::DenyListed);
                let policy = compiled();
                return Ok(Checked {
                    decision: Decision::blocked(&policy, Duration::MAX),
                    deny_listed: true,
                    ..unchecked(policy, None)
                });
            }
            Some(Listed::Allowed) => {
                self.record(Counted::Bypassed);
                return Ok(unchecked(compiled(), None));
            }
            None => {}
        }
        if self.honours_blocks
            && let Some(left) = shared.blocked(&check.block_key)
        {
            self.record(Counted::Blocked);
            shared.record_denial(&self.name, check.identity);
            return Ok(unchecked(compiled(), Some(left)));
        }
        let in_force = self.in_force(shared, check.shadow);
        if !in_force.checked() {
            self.record_as(Counted::OverrideOff, true);
            return Ok(unchecked(compiled(), None));
        }
        let policy = match self.rules(&in_force, || None) {
            Rules::Override(policy) | Rules::Plan(policy, _) => policy,
            Rules::Compiled | Rules::Unlimited => compiled(),
        };
        let shadow = in_force.shadow;
        let mut pending = admit(Checks {
            store: Arc::clone(&shared.store),
            key: check.key,
            rate: Some((Arc::clone(&policy), policy.cost())),
            concurrency: None,
            on_error: self.on_store_error.or(shared.on_store_error),
            waiters: None,
            shadow,
            penalty: check.penalty.map(|penalty| (penalty, check.block_key)),
            counting: check.refundable,
        });
        let admission = std::future::poll_fn(|cx| pending.poll(cx)).await;
        let overridden = in_force.overridden.is_some();
        let verdict = match admission.verdict {
            Some(Ok(verdict)) => verdict,
            Some(Err(error)) => {
                self.record_as(Counted::Error, overridden);
                // Shadow mode lets a failure through, as on the route.
                return match shadow {
                    true => Ok(unchecked(policy, None)),
                    false => Err(error),
                };
            }
            None => return Ok(unchecked(policy, None)),
        };
        self.record_as(Counted::of(&verdict), overridden);
        let mut decision = match verdict.into_decision(&policy) {
            Ok(decision) => decision,
            Err(_) if shadow => Decision::unchecked(&policy),
            Err(failed_closed) => return Err(failed_closed),
        };
        if !decision.allowed() {
            if shadow {
                self.record_shadowed();
                decision = Decision::unchecked(&policy);
            } else {
                shared.record_denial(&self.name, check.identity);
            }
        }
        Ok(Checked {
            decision,
            policy,
            blocked: None,
            deny_listed: false,
            refund: admission.refund,
        })
    }
}
