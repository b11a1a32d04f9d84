//! How a store declares each capability trait it implements: one builder
//! method per trait on [`Capabilities`], each needing its trait, so a
//! store cannot claim what it does not do; and the table's entries that
//! call the trait's methods.

use super::*;

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

impl<S: Refunds> Capabilities<S> {
    /// Declares [`Refunds`].
    pub const fn refunds(mut self) -> Self {
        self.refunds = Some(RefundOps {
            check: check_refundable_of::<S>,
            refund: refund_of::<S>,
        });
        self
    }
}

pub(crate) fn check_refundable_of<'a, S: Refunds>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Boxed<'a, (Decision, Option<Receipt>)> {
    Box::pin(async move { store.check_refundable(key, policy, cost).await })
}

pub(crate) fn refund_of<'a, S: Refunds>(
    store: &'a S,
    key: &'a str,
    policy: &'a Policy,
    receipt: &'a Receipt,
) -> Boxed<'a, ()> {
    Box::pin(async move { store.refund(key, policy, receipt).await })
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
    origin: crate::BlockOrigin,
) -> Boxed<'a, ()> {
    Box::pin(async move { store.block(key, duration, origin).await })
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
