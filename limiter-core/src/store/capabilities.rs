//! What only some stores do, each a trait of its own, and the table of a
//! store type's capabilities that code holding the store without naming
//! its type reads.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::Store;
use crate::concurrency::{Acquired, ConcurrencyLimit};
use crate::decision::Decision;
use crate::error::Error;
use crate::hot::{LeaseGrant, LeaseRequest};
use crate::policy::Policy;
use crate::verdict::{OnStoreError, Verdict};

/// A store call as a boxed future, for calls through the table.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Parts of a store that fail on their own (the nodes of a Redis Cluster):
/// a guard keeps a circuit breaker per part, so that a part that is down
/// costs only its own keys.
pub trait FailureDomains: Store {
    /// The part of the store that serves `key`. 0 is the whole store.
    /// Called before every guarded call: it must be cheap.
    fn failure_domain(&self, key: &str) -> u64;

    /// A name for failure domain `domain` (a node's address), for the
    /// breaker's metrics and logs. Called once per domain.
    fn failure_domain_name(&self, domain: u64) -> String {
        domain.to_string()
    }
}

/// A store that bounds each of its calls itself, connecting included, and
/// answers [`Error::Timeout`] past the bound: a guard whose deadline is no
/// shorter adds no timer of its own, so each call has one deadline.
pub trait Bounded: Store {
    /// The bound of each call.
    fn deadline(&self) -> Duration;
}

/// Concurrency permits: requests in flight per key.
pub trait Permits: Store {
    /// Takes a permit of `limit` on `key` when fewer than
    /// [`limit.max()`](ConcurrencyLimit::max) permits of the key are held,
    /// in one atomic step. The permit is given back when it is dropped; on a
    /// shared store it is a lease that its holder renews while it is held.
    fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send;
}

/// Leases of a key's quota, which a leased policy
/// ([`Policy::with_lease`]) takes from a remote store so that an instance
/// hands permits out locally.
pub trait Leases: Store {
    /// Takes up to `request.want()` permits of `key` for
    /// `request.length()`, at least `request.need()` (else the request is
    /// denied and nothing is taken), in one atomic step. The store counts
    /// the permits as used at the lease's end.
    fn lease(
        &self,
        key: &str,
        policy: &Policy,
        request: &LeaseRequest,
    ) -> impl Future<Output = Result<LeaseGrant, Error>> + Send;

    /// Gives back `unused` permits of `grant`, once the lease has ended;
    /// answers how many the store took back (none when the window that
    /// held them is over).
    fn end_lease(
        &self,
        key: &str,
        policy: &Policy,
        grant: &LeaseGrant,
        unused: u64,
    ) -> impl Future<Output = Result<u64, Error>> + Send;
}

/// Reading a key's state without changing it.
pub trait Peek: Store {
    /// What a check of `cost` against `policy` on `key` would answer now
    /// (allowed, remaining per rule, retry after, reset after), recording
    /// nothing: the next check answers as if this call had not been made.
    /// Fails with [`Error::Config`] for a cost the check would refuse.
    fn peek(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send;
}

/// Forgetting a key's state.
pub trait Reset: Store {
    /// Forgets what `key` holds under `policy`: its next check finds the
    /// whole quota. Resetting a key without state does nothing.
    fn reset(&self, key: &str, policy: &Policy) -> impl Future<Output = Result<(), Error>> + Send;
}

/// What an instance forgets because a key was reset through a store it
/// shares with other instances ([`AnnouncesResets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forget {
    /// What it remembers of this key.
    Key(std::sync::Arc<str>),
    /// Everything it remembers of any key: notices may have been missed
    /// (the store's subscription was lost and is back).
    Everything,
}

/// Forgets what [`Forget`] says; answers `false` once its owner is gone,
/// and is then dropped.
pub type Forgetter = Box<dyn Fn(&Forget) -> bool + Send + Sync>;

/// A store shared by several instances that tells each instance of every
/// key reset through it, so that what the instance remembers of the key
/// (its deny cache, leases and samples) goes too: the
/// [`Guarded`](crate::Guarded) store and [`HotKeys`](crate::HotKeys)
/// register here when they are made.
pub trait AnnouncesResets: Store {
    /// Calls `forget` with each key reset through the store, by any
    /// instance, and with [`Forget::Everything`] when notices may have
    /// been missed.
    fn on_reset(&self, forget: Forgetter);
}

/// Blocking a key (an identity's, under a prefix) for a while, shared by
/// every instance using the store.
pub trait Blocks: Store {
    /// Blocks `key` for `duration`, replacing a block it has; every
    /// instance answers it blocked once this returns.
    fn block(
        &self,
        key: &str,
        duration: Duration,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Lifts `key`'s block; every instance answers it unblocked once this
    /// returns.
    fn unblock(&self, key: &str) -> impl Future<Output = Result<(), Error>> + Send;

    /// How long `key` stays blocked, as this instance knows it now, without
    /// a call (each request asks); `None` when it is not blocked.
    fn blocked(&self, key: &str) -> Option<Duration>;

    /// The list [`blocked`](Self::blocked) reads, when the store keeps one:
    /// a caller that finds it [empty](crate::BlockList::is_empty) skips the
    /// lookup (the HTTP layer, on every request).
    fn block_list(&self) -> Option<std::sync::Arc<crate::BlockList>> {
        None
    }
}

/// Penalties: denials counted per identity and limit, earning blocks.
pub trait Penalties: Store {
    /// Records a denial under `key` (an identity's under one limit) by
    /// `penalty`, in one atomic step; answers the block it earns, if any
    /// (the caller blocks the identity through [`Blocks`]).
    fn penalize(
        &self,
        key: &str,
        penalty: &crate::Penalty,
    ) -> impl Future<Output = Result<Option<Duration>, Error>> + Send;
}

/// Which plan each key has, kept by the store so that every instance using
/// it answers the same (the per-process [`Plans`](crate::Plans) resolver of
/// an application being the embedded default).
pub trait PlanAssignments: Store {
    /// Gives `key` the plan named `plan` (`None`: the default); every
    /// instance answers it once this returns.
    fn assign_plan(
        &self,
        key: &str,
        plan: Option<&str>,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// The plan `key` has, as this instance knows it now, without a call;
    /// `None` for the default.
    fn assigned_plan(&self, key: &str) -> Option<std::sync::Arc<str>>;

    /// How many keys have a plan other than the default.
    fn assigned_plans(&self) -> usize;
}

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
pub(crate) type AssignOp<S> = for<'a> fn(&'a S, &'a str, Option<&'a str>) -> Boxed<'a, ()>;

/// The table's entries of [`PlanAssignments`].
pub(crate) struct PlanOps<S: ?Sized> {
    pub(crate) assign: AssignOp<S>,
    pub(crate) assigned: fn(&S, &str) -> Option<std::sync::Arc<str>>,
    pub(crate) count: fn(&S) -> usize,
}

pub(crate) type PenalizeOp<S> =
    for<'a> fn(&'a S, &'a str, &'a crate::Penalty) -> Boxed<'a, Option<Duration>>;
pub(crate) type BlockOp<S> = for<'a> fn(&'a S, &'a str, Duration) -> Boxed<'a, ()>;
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
type GuardPermitOp<S> =
    for<'a> fn(&'a S, &'a str, &'a ConcurrencyLimit, Option<OnStoreError>) -> Boxed<'a, Acquired>;

/// How a store that guards itself decides by a caller's failure policy.
pub(crate) struct GuardOps<S: ?Sized> {
    pub(crate) check: GuardCheckOp<S>,
    pub(crate) permit: Option<GuardPermitOp<S>>,
}

/// A store type's capabilities, for code that holds a store without
/// naming its type: where its state lives (in process, or across a
/// network, which the HTTP layer guards), and which capability traits it
/// implements. A store declares them once, in [`Store::CAPABILITIES`]; each
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

impl<S: Bounded> Capabilities<S> {
    /// Declares [`Bounded`]: the store bounds each call itself.
    pub const fn bounded(mut self) -> Self {
        self.bounded = Some(S::deadline);
        self
    }
}

impl<S: FailureDomains> Capabilities<S> {
    /// Declares [`FailureDomains`]: a guard keeps a breaker per part.
    pub const fn failure_domains(mut self) -> Self {
        self.domains = Some((S::failure_domain, S::failure_domain_name));
        self
    }
}

impl<S: Permits> Capabilities<S> {
    /// Declares [`Permits`].
    pub const fn permits(mut self) -> Self {
        self.permits = Some(permit_of::<S>);
        self
    }
}

impl<S: Leases> Capabilities<S> {
    /// Declares [`Leases`].
    pub const fn leases(mut self) -> Self {
        self.leases = Some((lease::<S>, end_lease::<S>));
        self
    }
}

impl<S: PlanAssignments> Capabilities<S> {
    /// Declares [`PlanAssignments`].
    pub const fn plan_assignments(mut self) -> Self {
        self.plans = Some(PlanOps {
            assign: assign_of::<S>,
            assigned: S::assigned_plan,
            count: S::assigned_plans,
        });
        self
    }
}

pub(crate) fn assign_of<'a, S: PlanAssignments>(
    store: &'a S,
    key: &'a str,
    plan: Option<&'a str>,
) -> Boxed<'a, ()> {
    Box::pin(async move { store.assign_plan(key, plan).await })
}

impl<S: Penalties> Capabilities<S> {
    /// Declares [`Penalties`].
    pub const fn penalties(mut self) -> Self {
        self.penalize = Some(penalize_of::<S>);
        self
    }
}

pub(crate) fn penalize_of<'a, S: Penalties>(
    store: &'a S,
    key: &'a str,
    penalty: &'a crate::Penalty,
) -> Boxed<'a, Option<Duration>> {
    Box::pin(async move { store.penalize(key, penalty).await })
}

impl<S: Blocks> Capabilities<S> {
    /// Declares [`Blocks`].
    pub const fn blocks(mut self) -> Self {
        self.blocks = Some(BlockOps {
            block: block_of::<S>,
            unblock: unblock_of::<S>,
            blocked: S::blocked,
            list: S::block_list,
        });
        self
    }
}

pub(crate) fn block_of<'a, S: Blocks>(
    store: &'a S,
    key: &'a str,
    duration: Duration,
) -> Boxed<'a, ()> {
    Box::pin(async move { store.block(key, duration).await })
}

pub(crate) fn unblock_of<'a, S: Blocks>(store: &'a S, key: &'a str) -> Boxed<'a, ()> {
    Box::pin(async move { store.unblock(key).await })
}

impl<S: AnnouncesResets> Capabilities<S> {
    /// Declares [`AnnouncesResets`].
    pub const fn announces_resets(mut self) -> Self {
        self.resets = Some(S::on_reset);
        self
    }
}

impl<S: Peek> Capabilities<S> {
    /// Declares [`Peek`].
    pub const fn peek(mut self) -> Self {
        self.peek = Some(peek_of::<S>);
        self
    }
}

impl<S: Reset> Capabilities<S> {
    /// Declares [`Reset`].
    pub const fn reset(mut self) -> Self {
        self.reset = Some(reset_of::<S>);
        self
    }
}

pub(crate) fn peek_of<'a, S: Peek>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Boxed<'a, Decision> {
    Box::pin(async move { store.peek(key, policy, cost).await })
}

pub(crate) fn reset_of<'a, S: Reset>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
) -> Boxed<'a, ()> {
    Box::pin(async move { store.reset(key, policy).await })
}

/// [`Permits::acquire_permit`] as a table entry.
pub(crate) fn permit_of<'a, S: Permits>(
    store: &'a S,
    key: &'a str,
    limit: &'a ConcurrencyLimit,
) -> Boxed<'a, Acquired> {
    Box::pin(async move { store.acquire_permit(key, limit).await })
}

fn lease<'a, S: Leases>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    request: &'a LeaseRequest,
) -> Boxed<'a, LeaseGrant> {
    Box::pin(async move { store.lease(key, policy, request).await })
}

fn end_lease<'a, S: Leases>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    grant: &'a LeaseGrant,
    unused: u64,
) -> Boxed<'a, u64> {
    Box::pin(async move { store.end_lease(key, policy, grant, unused).await })
}

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
            .field("guarded", &self.is_guarded())
            .field("hot_keys", &self.hot_keys)
            .finish()
    }
}
