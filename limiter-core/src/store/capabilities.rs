//! The table of a store type's capabilities (see [`traits`](super::traits)
//! for the traits themselves), which code holding the store without naming
//! its type reads.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::traits::{
    AnnouncesResets, Blocks, Bounded, FailureDomains, Forgetter, Leases, Peek, Penalties, Permits,
    PlanAssignments, Refunds, Reset,
};
use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::decision::Decision;
use crate::error::Error;
use crate::hot::{LeaseGrant, LeaseRequest};
use crate::policy::Policy;
use crate::refund::Receipt;
use crate::verdict::{OnStoreError, Verdict};

/// A store call as a boxed future, for calls through the table.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

type DomainOp<S> = fn(&S, &str) -> u64;
type DomainNameOp<S> = fn(&S, u64) -> String;
pub(crate) type PermitOp<S> =
    for<'a> fn(&'a S, &'a str, &'a ConcurrencyLimit) -> Boxed<'a, Acquired>;
pub(crate) type LeaseOp<S> =
    for<'a> fn(&'a S, &'a str, &'a Policy, &'a LeaseRequest) -> Boxed<'a, LeaseGrant>;
pub(crate) type EndLeaseOp<S> =
    for<'a> fn(&'a S, &'a str, &'a Policy, &'a LeaseGrant, u64) -> Boxed<'a, u64>;
pub(crate) type PeekOp<S> = for<'a> fn(&'a S, &'a str, &'a Policy, u64) -> Boxed<'a, Decision>;
pub(crate) type ResetOp<S> = for<'a> fn(&'a S, &'a str, &'a Policy) -> Boxed<'a, ()>;
pub(crate) type CheckRefundableOp<S> =
    for<'a> fn(&'a S, &'a str, &'a Policy, u64) -> Boxed<'a, (Decision, Option<Receipt>)>;
pub(crate) type RefundOp<S> = for<'a> fn(&'a S, &'a str, &'a Policy, &'a Receipt) -> Boxed<'a, ()>;

/// The table's entries of [`Refunds`].
pub(crate) struct RefundOps<S: ?Sized> {
    pub(crate) check: CheckRefundableOp<S>,
    pub(crate) refund: RefundOp<S>,
}

pub(crate) type AssignOp<S> = for<'a> fn(&'a S, &'a str, Option<&'a str>) -> Boxed<'a, ()>;

/// The table's entries of [`PlanAssignments`].
pub(crate) struct PlanOps<S: ?Sized> {
    pub(crate) assign: AssignOp<S>,
    pub(crate) assigned: fn(&S, &str) -> Option<std::sync::Arc<str>>,
    pub(crate) count: fn(&S) -> usize,
}

pub(crate) type PenalizeOp<S> =
    for<'a> fn(&'a S, &'a str, &'a crate::Penalty) -> Boxed<'a, Option<Duration>>;
pub(crate) type BlockOp<S> =
    for<'a> fn(&'a S, &'a str, Duration, crate::BlockOrigin) -> Boxed<'a, ()>;
pub(crate) type UnblockOp<S> = for<'a> fn(&'a S, &'a str) -> Boxed<'a, ()>;
pub(crate) type BlockedOp<S> = fn(&S, &str) -> Option<Duration>;

/// The table's entries of [`Blocks`].
pub(crate) struct BlockOps<S: ?Sized> {
    pub(crate) block: BlockOp<S>,
    pub(crate) unblock: UnblockOp<S>,
    pub(crate) blocked: BlockedOp<S>,
    pub(crate) list: fn(&S) -> Option<std::sync::Arc<crate::BlockList>>,
}

type GuardCheckOp<S> =
    for<'a> fn(&'a S, &'a str, &'a Policy, u64, Option<OnStoreError>) -> Boxed<'a, Verdict>;
type GuardRefundableOp<S> = for<'a> fn(
    &'a S,
    &'a str,
    &'a Policy,
    u64,
    Option<OnStoreError>,
) -> Boxed<'a, (Verdict, Option<Receipt>)>;
type GuardPermitOp<S> =
    for<'a> fn(&'a S, &'a str, &'a ConcurrencyLimit, Option<OnStoreError>) -> Boxed<'a, Acquired>;

/// How a store that guards itself decides by a caller's failure policy.
pub(crate) struct GuardOps<S: ?Sized> {
    pub(crate) check: GuardCheckOp<S>,
    pub(crate) permit: Option<GuardPermitOp<S>>,
    pub(crate) check_refundable: Option<GuardRefundableOp<S>>,
}

/// A store type's capabilities, for code that holds a store without
/// naming its type: where its state lives (in process, or across a
/// network, which the HTTP layer guards), and which capability traits it
/// implements. A store declares them once, in [`Store::CAPABILITIES`](super::Store::CAPABILITIES); each
/// builder method needs the trait it declares, so a store cannot claim
/// what it does not do.
///
/// ```
/// # use limiter_core::{Acquired, Capabilities, ConcurrencyLimit, Decision, Error, Permits, Policy, Store};
/// struct Local;
///
/// impl Store for Local {
///     // In process: never slow, never failing; and it keeps permits.
///     const CAPABILITIES: Capabilities<Self> = Capabilities::LOCAL.permits();
///     # async fn check(&self, _: &str, _: &Policy, _: u64) -> Result<Decision, Error> { unimplemented!() }
/// }
///
/// impl Permits for Local {
///     # async fn acquire_permit(&self, _: &str, _: &ConcurrencyLimit) -> Result<Acquired, Error> { unimplemented!() }
/// }
///
/// assert!(!Local::CAPABILITIES.is_remote());
/// assert!(Local::CAPABILITIES.has_permits());
/// assert!(!Local::CAPABILITIES.has_leases());
/// ```
pub struct Capabilities<S: ?Sized> {
    remote: bool,
    bounded: Option<fn(&S) -> Duration>,
    domains: Option<(DomainOp<S>, DomainNameOp<S>)>,
    pub(crate) permits: Option<PermitOp<S>>,
    pub(crate) leases: Option<(LeaseOp<S>, EndLeaseOp<S>)>,
    pub(crate) peek: Option<PeekOp<S>>,
    pub(crate) reset: Option<ResetOp<S>>,
    pub(crate) guard: Option<GuardOps<S>>,
    pub(crate) resets: Option<fn(&S, Forgetter)>,
    pub(crate) blocks: Option<BlockOps<S>>,
    pub(crate) penalize: Option<PenalizeOp<S>>,
    pub(crate) plans: Option<PlanOps<S>>,
    pub(crate) refunds: Option<RefundOps<S>>,
    hot_keys: bool,
}

impl<S: ?Sized> Capabilities<S> {
    /// In process: calls never wait on anything and never fail, so nothing
    /// guards them (the memory store).
    pub const LOCAL: Self = Self {
        remote: false,
        bounded: None,
        domains: None,
        permits: None,
        leases: None,
        peek: None,
        reset: None,
        guard: None,
        resets: None,
        blocks: None,
        penalize: None,
        plans: None,
        refunds: None,
        hot_keys: false,
    };

    /// Across a network: calls can be slow or fail, so the HTTP layer
    /// guards them with a deadline, a circuit breaker and the failure
    /// policy (unless the store guards itself). The default.
    pub const REMOTE: Self = Self {
        remote: true,
        ..Self::LOCAL
    };

    /// Whether calls cross a network.
    pub const fn is_remote(&self) -> bool {
        self.remote
    }

    /// Whether the store guards its own calls, as
    /// [`Guarded`](crate::Guarded) does: one owner guards a store.
    pub const fn is_guarded(&self) -> bool {
        self.guard.is_some()
    }

    /// Whether the store honours the policies' hot-key modes itself
    /// ([`HotKeys`](crate::HotKeys)), so that no one in front of it does.
    pub const fn honours_hot_keys(&self) -> bool {
        self.hot_keys
    }

    /// Whether the store keeps concurrency permits ([`Permits`]).
    pub const fn has_permits(&self) -> bool {
        self.permits.is_some()
    }

    /// Whether the store leases quota ([`Leases`]).
    pub const fn has_leases(&self) -> bool {
        self.leases.is_some()
    }

    /// Whether the store reads a key without changing it ([`Peek`]).
    pub const fn has_peek(&self) -> bool {
        self.peek.is_some()
    }

    /// Whether the store forgets a key's state ([`Reset`]).
    pub const fn has_reset(&self) -> bool {
        self.reset.is_some()
    }

    /// Whether the store blocks keys ([`Blocks`]).
    pub const fn has_blocks(&self) -> bool {
        self.blocks.is_some()
    }

    /// How long `key` stays blocked in `store` ([`Blocks::blocked`]);
    /// `None` when it is not, or the store blocks nothing.
    #[inline]
    pub fn blocked(&self, store: &S, key: &str) -> Option<Duration> {
        (self.blocks.as_ref()?.blocked)(store, key)
    }

    /// The list of blocks `store` answers from ([`Blocks::block_list`]).
    pub fn block_list(&self, store: &S) -> Option<std::sync::Arc<crate::BlockList>> {
        (self.blocks.as_ref()?.list)(store)
    }

    /// Registers `forget` with `store` when it announces resets
    /// ([`AnnouncesResets`]); answers whether it does.
    pub fn on_reset(&self, store: &S, forget: Forgetter) -> bool {
        self.resets
            .map(|on_reset| on_reset(store, forget))
            .is_some()
    }

    /// The bound `store` keeps on each call ([`Bounded`]), if it keeps one.
    pub fn deadline(&self, store: &S) -> Option<Duration> {
        self.bounded.map(|deadline| deadline(store))
    }

    /// The part of `store` that serves `key` ([`FailureDomains`]); 0, the
    /// whole store, when it has no parts.
    pub fn failure_domain(&self, store: &S, key: &str) -> u64 {
        self.domains.map_or(0, |(domain, _)| domain(store, key))
    }

    /// The name of failure domain `domain` of `store`.
    pub fn failure_domain_name(&self, store: &S, domain: u64) -> String {
        self.domains
            .map_or_else(|| domain.to_string(), |(_, name)| name(store, domain))
    }

    /// Whether the store guards its permits too.
    pub(crate) const fn has_guarded_permits(&self) -> bool {
        matches!(
            &self.guard,
            Some(GuardOps {
                permit: Some(_),
                ..
            })
        )
    }

    pub(crate) const fn honouring_hot_keys(mut self) -> Self {
        self.hot_keys = true;
        self
    }

    pub(crate) const fn guarded_by(mut self, guard: GuardOps<S>) -> Self {
        self.guard = Some(guard);
        self
    }

    pub(crate) const fn with_permit_op(mut self, op: Option<PermitOp<S>>) -> Self {
        self.permits = op;
        self
    }

    pub(crate) const fn with_control_ops(
        mut self,
        peek: Option<PeekOp<S>>,
        reset: Option<ResetOp<S>>,
    ) -> Self {
        self.peek = peek;
        self.reset = reset;
        self
    }

    pub(crate) const fn with_plan_ops(mut self, ops: Option<PlanOps<S>>) -> Self {
        self.plans = ops;
        self
    }

    /// Whether the store keeps plan assignments ([`PlanAssignments`]).
    pub const fn has_plan_assignments(&self) -> bool {
        self.plans.is_some()
    }

    /// The plan `key` has in `store` ([`PlanAssignments::assigned_plan`]);
    /// `None` for the default, or when the store keeps no assignments.
    pub fn assigned_plan(&self, store: &S, key: &str) -> Option<std::sync::Arc<str>> {
        (self.plans.as_ref()?.assigned)(store, key)
    }

    /// How many keys have a plan in `store` (0 when it keeps none).
    pub fn assigned_plans(&self, store: &S) -> usize {
        self.plans.as_ref().map_or(0, |ops| (ops.count)(store))
    }

    pub(crate) const fn with_refund_ops(mut self, ops: Option<RefundOps<S>>) -> Self {
        self.refunds = ops;
        self
    }

    /// Whether the store counts requests by outcome ([`Refunds`]).
    pub const fn has_refunds(&self) -> bool {
        self.refunds.is_some()
    }

    pub(crate) const fn with_penalize_op(mut self, op: Option<PenalizeOp<S>>) -> Self {
        self.penalize = op;
        self
    }

    /// Whether the store counts penalties ([`Penalties`]).
    pub const fn has_penalties(&self) -> bool {
        self.penalize.is_some()
    }

    pub(crate) const fn with_block_ops(mut self, ops: Option<BlockOps<S>>) -> Self {
        self.blocks = ops;
        self
    }

    pub(crate) const fn with_resets(mut self, resets: Option<fn(&S, Forgetter)>) -> Self {
        self.resets = resets;
        self
    }

    pub(crate) const fn with_lease_ops(mut self, ops: Option<(LeaseOp<S>, EndLeaseOp<S>)>) -> Self {
        self.leases = ops;
        self
    }
}

#[path = "declare.rs"]
mod declare;
pub(crate) use declare::{peek_of, permit_of, reset_of};

impl<S: ?Sized> fmt::Debug for Capabilities<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capabilities")
            .field("remote", &self.remote)
            .field("bounded", &self.bounded.is_some())
            .field("failure_domains", &self.domains.is_some())
            .field("permits", &self.has_permits())
            .field("leases", &self.has_leases())
            .field("peek", &self.has_peek())
            .field("reset", &self.has_reset())
            .field("announces_resets", &self.resets.is_some())
            .field("blocks", &self.has_blocks())
            .field("penalties", &self.has_penalties())
            .field("plan_assignments", &self.has_plan_assignments())
            .field("refunds", &self.has_refunds())
            .field("guarded", &self.is_guarded())
            .field("hot_keys", &self.hot_keys)
            .finish()
    }
}
