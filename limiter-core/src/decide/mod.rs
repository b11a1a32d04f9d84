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
//!
//! A key no limit names (the programmatic [`Limiter`](crate::Limiter)'s,
//! and `Control::check` and `attempt`'s) has no override, plan, metrics or
//! offenders: it takes steps 3 and 5 ([`Shared::check_key`],
//! [`Shared::attempt_key`]). A peek, such as the admin view's, reads the
//! state under the policy in force (step 4), counting nothing.

mod admission;
mod counters;
mod offenders;
mod shared;
mod store;
#[cfg(test)]
mod tests;

pub use admission::{Admission, Checks, Detached, Pending, Refund, admit};
pub use counters::{Counted, DecisionCounters, ShadowCounter};
pub use offenders::{
    DEFAULT_PUBLISH_EVERY, Offenders, PUBLISHED, board, default_instance, layer_instance, sanitized,
};
pub use shared::Shared;
pub(crate) use store::unguarded;
pub use store::{BoxFuture, COUNTING, LimitStore, StoreBuilder, store_builder, tables_of};

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Decision, Error, Identity, Key, OnStoreError, Override, OverrideMode, Penalty, Plan, Policy,
};

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
