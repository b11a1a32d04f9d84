//! What a guarded store does besides its guarded checks: its table of
//! capabilities (each a call through the guard to the store's own), and
//! the capability traits it implements when the store does.

use super::*;

impl<S: Store, C: Clock + Clone> Store for Guarded<S, C> {
    /// Across a network as the guarded store is, guarding itself, and
    /// keeping permits and leasing quota when the guarded store does.
    const CAPABILITIES: Capabilities<Self> = Capabilities::REMOTE
        .guarded_by(GuardOps {
            check: check_verdict::<S, C>,
            permit: if S::CAPABILITIES.has_permits() {
                Some(permit_verdict::<S, C>)
            } else {
                None
            },
            check_refundable: if S::CAPABILITIES.has_refunds() {
                Some(refundable_verdict::<S, C>)
            } else {
                None
            },
        })
        .with_refund_ops(if S::CAPABILITIES.has_refunds() {
            Some(RefundOps {
                check: check_refundable_entry::<S, C>,
                refund: refund_entry::<S, C>,
            })
        } else {
            None
        })
        .with_permit_op(if S::CAPABILITIES.has_permits() {
            Some(permit::<S, C>)
        } else {
            None
        })
        .with_lease_ops(if S::CAPABILITIES.has_leases() {
            Some((lease::<S, C>, end_lease::<S, C>))
        } else {
            None
        })
        .with_resets(if S::CAPABILITIES.resets.is_some() {
            Some(forward_on_reset::<S, C>)
        } else {
            None
        })
        .with_plan_ops(if S::CAPABILITIES.has_plan_assignments() {
            Some(PlanOps {
                assign: assign_entry::<S, C>,
                assigned: assigned_entry::<S, C>,
                count: count_entry::<S, C>,
            })
        } else {
            None
        })
        .with_penalize_op(if S::CAPABILITIES.has_penalties() {
            Some(penalize_entry::<S, C>)
        } else {
            None
        })
        .with_block_ops(if S::CAPABILITIES.has_blocks() {
            Some(BlockOps {
                block: block_entry::<S, C>,
                unblock: unblock_entry::<S, C>,
                blocked: blocked_entry::<S, C>,
                list: list_entry::<S, C>,
            })
        } else {
            None
        })
        .with_control_ops(
            if S::CAPABILITIES.has_peek() {
                Some(peek_entry::<S, C>)
            } else {
                None
            },
            if S::CAPABILITIES.has_reset() {
                Some(reset_entry::<S, C>)
            } else {
                None
            },
        );

    /// Checks with the configured failure policy. Failing open answers an
    /// allowed decision with every rule's whole quota remaining; failing
    /// closed answers [`Error::Unavailable`].
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        (self
            .check_with(key, policy, cost, self.inner.config.on_store_error)
            .await?)
            .into_decision(policy)
    }
}

impl<S: Permits, C: Clock + Clone> Permits for Guarded<S, C> {
    /// Takes a permit with the configured failure policy.
    fn acquire_permit(
        &self,
        key: &str,
        limit: &ConcurrencyLimit,
    ) -> impl Future<Output = Result<Acquired, Error>> + Send {
        self.acquire_permit_with(key, limit, self.inner.config.on_store_error)
    }
}

impl<S: Peek, C: Clock + Clone> Peek for Guarded<S, C> {
    /// Peeks within the deadline, through the key's breaker.
    async fn peek(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.peek_by(peek_of::<S>, key, policy, cost).await
    }
}

impl<S: Refunds, C: Clock + Clone> Refunds for Guarded<S, C> {
    /// Checks with the configured failure policy; a request the failure
    /// policy decided has no receipt (it stays counted where it was).
    async fn check_refundable(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error> {
        check_refundable_entry(self, key, policy, cost).await
    }

    /// Refunds within the deadline, through the key's breaker, and forgets
    /// the key's cached denial here (the refund may end it).
    async fn refund(
        &self,
        key: &str,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> Result<(), Error> {
        refund_entry(self, key, policy, receipt).await
    }
}

impl<S: Blocks, C: Clock + Clone> Blocks for Guarded<S, C> {
    /// Blocks within the deadline, through the key's breaker.
    async fn block(
        &self,
        key: &str,
        duration: Duration,
        origin: crate::BlockOrigin,
    ) -> Result<(), Error> {
        block_entry(self, key, duration, origin).await
    }

    async fn unblock(&self, key: &str) -> Result<(), Error> {
        unblock_entry(self, key).await
    }

    fn blocked(&self, key: &str) -> Option<Duration> {
        self.inner.store.blocked(key)
    }

    fn block_list(&self) -> Option<Arc<crate::BlockList>> {
        self.inner.store.block_list()
    }
}

impl<S: Reset, C: Clock + Clone> Reset for Guarded<S, C> {
    /// Resets the store within the deadline, through the key's breaker, and
    /// forgets the key's denial and fallback state here.
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        self.reset_by(reset_of::<S>, key, policy).await
    }
}

impl<S: Store, C: Clock + Clone> Guarded<S, C> {
    /// `call` within the deadline, through the key's breaker: an open
    /// breaker answers [`Error::Unavailable`] at once. For calls without a
    /// failure policy (a lease's caller, [`HotKeys`](crate::HotKeys), then
    /// checks through [`ask::verdict`](crate::ask::verdict), which applies
    /// it; a peek or a reset fails).
    async fn through_breaker<T, F: Future<Output = Result<T, Error>>>(
        &self,
        key: &str,
        call: impl FnOnce() -> F,
    ) -> Result<T, Error> {
        let breaker = self.breaker(key);
        match self.call(&breaker, call).await {
            Called::Answered(answer) => answer,
            Called::Failed(error) => {
                Err(error.unwrap_or_else(|| Error::Unavailable(breaker.until_probe())))
            }
        }
    }

    async fn peek_by(
        &self,
        peek: PeekOp<S>,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, Error> {
        self.through_breaker(key, || peek(&self.inner.store, key, policy, cost))
            .await
    }

    /// Forgets the key here too, before the store does and again after (a
    /// denial cached meanwhile came from the state being reset).
    async fn reset_by(&self, reset: ResetOp<S>, key: &str, policy: &Policy) -> Result<(), Error> {
        self.forget_local(key, policy);
        let reset = self
            .through_breaker(key, || reset(&self.inner.store, key, policy))
            .await;
        self.forget_local(key, policy);
        unconfirmed(reset)
    }

    /// Forgets what this instance remembers of `key`: a denial in the
    /// deny cache, the fallback's state.
    fn forget_local(&self, key: &str, policy: &Policy) {
        if let Some(cache) = &self.inner.deny_cache {
            cache.remove(key);
        }
        self.inner
            .fallback
            .reset_at(key, policy, self.inner.clock.now_micros());
    }
}

// The table's entries (see `Store::CAPABILITIES` above): each reached only
// when the guarded store has what it calls.

fn check_verdict<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Boxed<'a, Verdict> {
    let on_error = on_error.unwrap_or(guarded.inner.config.on_store_error);
    // An async block, so the future is made in its box, not copied there.
    Box::pin(async move { guarded.check_with(key, policy, cost, on_error).await })
}

fn refundable_verdict<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Boxed<'a, (Verdict, Option<crate::Receipt>)> {
    let on_error = on_error.unwrap_or(guarded.inner.config.on_store_error);
    Box::pin(async move {
        let Some(ops) = S::CAPABILITIES.refunds.as_ref() else {
            return Err(Error::Unsupported("refunds"));
        };
        let store = &guarded.inner.store;
        let check = || (ops.check)(store, key, policy, cost);
        let (verdict, receipt) = guarded
            .decide_with(key, policy, cost, on_error, check)
            .await?;
        Ok((verdict, receipt.flatten()))
    })
}

fn check_refundable_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Boxed<'a, (Decision, Option<crate::Receipt>)> {
    Box::pin(async move {
        let (verdict, receipt) = refundable_verdict(guarded, key, policy, cost, None).await?;
        Ok((verdict.into_decision(policy)?, receipt))
    })
}

fn refund_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    receipt: &'a crate::Receipt,
) -> Boxed<'a, ()> {
    Box::pin(async move {
        let Some(refund) = ask::refund(&guarded.inner.store, key, policy, receipt) else {
            return Err(Error::Unsupported("refunds"));
        };
        let refunded = guarded.through_breaker(key, || refund).await;
        if let Some(cache) = &guarded.inner.deny_cache {
            cache.remove(key);
        }
        refunded
    })
}

fn permit_verdict<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    limit: &'a ConcurrencyLimit,
    on_error: Option<OnStoreError>,
) -> Boxed<'a, Acquired> {
    let on_error = on_error.unwrap_or(guarded.inner.config.on_store_error);
    match S::CAPABILITIES.permits {
        Some(permit) => Box::pin(async move {
            guarded
                .acquire_permit_by(permit, key, limit, on_error)
                .await
        }),
        None => Box::pin(async { Err(Error::Unsupported("concurrency limits")) }),
    }
}

fn permit<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    limit: &'a ConcurrencyLimit,
) -> Boxed<'a, Acquired> {
    permit_verdict(guarded, key, limit, None)
}

fn lease<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    request: &'a LeaseRequest,
) -> Boxed<'a, LeaseGrant> {
    match S::CAPABILITIES.leases {
        Some((lease, _)) => Box::pin(async move {
            guarded
                .through_breaker(key, || lease(&guarded.inner.store, key, policy, request))
                .await
        }),
        None => Box::pin(async { Err(Error::Unsupported("leases")) }),
    }
}

fn end_lease<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    grant: &'a LeaseGrant,
    unused: u64,
) -> Boxed<'a, u64> {
    match S::CAPABILITIES.leases {
        Some((_, end_lease)) => {
            Box::pin(guarded.within_deadline(move || {
                end_lease(&guarded.inner.store, key, policy, grant, unused)
            }))
        }
        None => Box::pin(async { Ok(0) }),
    }
}

fn assign_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    plan: Option<&'a str>,
) -> Boxed<'a, ()> {
    Box::pin(async move {
        match ask::assign_plan(&guarded.inner.store, key, plan) {
            Some(assign) => unconfirmed(guarded.through_breaker(key, || assign).await),
            None => Err(Error::Unsupported("plan assignments")),
        }
    })
}

fn assigned_entry<S: Store, C>(guarded: &Guarded<S, C>, key: &str) -> Option<Arc<str>> {
    S::CAPABILITIES.assigned_plan(&guarded.inner.store, key)
}

fn count_entry<S: Store, C>(guarded: &Guarded<S, C>) -> usize {
    S::CAPABILITIES.assigned_plans(&guarded.inner.store)
}

fn penalize_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    penalty: &'a crate::Penalty,
) -> Boxed<'a, Option<Duration>> {
    Box::pin(async move {
        match ask::penalize(&guarded.inner.store, key, penalty) {
            Some(penalize) => guarded.through_breaker(key, || penalize).await,
            None => Err(Error::Unsupported("penalties")),
        }
    })
}

fn block_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    duration: Duration,
    origin: crate::BlockOrigin,
) -> Boxed<'a, ()> {
    Box::pin(async move {
        match ask::block(&guarded.inner.store, key, duration, origin) {
            Some(block) => unconfirmed(guarded.through_breaker(key, || block).await),
            None => Err(Error::Unsupported("blocks")),
        }
    })
}

fn unblock_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
) -> Boxed<'a, ()> {
    Box::pin(async move {
        match ask::unblock(&guarded.inner.store, key) {
            Some(unblock) => unconfirmed(guarded.through_breaker(key, || unblock).await),
            None => Err(Error::Unsupported("blocks")),
        }
    })
}

fn list_entry<S: Store, C>(guarded: &Guarded<S, C>) -> Option<Arc<crate::BlockList>> {
    S::CAPABILITIES.block_list(&guarded.inner.store)
}

fn blocked_entry<S: Store, C>(guarded: &Guarded<S, C>, key: &str) -> Option<Duration> {
    S::CAPABILITIES.blocked(&guarded.inner.store, key)
}

fn forward_on_reset<S: Store, C>(guarded: &Guarded<S, C>, forget: Forgetter) {
    S::CAPABILITIES.on_reset(&guarded.inner.store, forget);
}

fn peek_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Boxed<'a, Decision> {
    match S::CAPABILITIES.peek {
        Some(peek) => Box::pin(guarded.peek_by(peek, key, policy, cost)),
        None => Box::pin(async { Err(Error::Unsupported("peek")) }),
    }
}

fn reset_entry<'a, S: Store, C: Clock + Clone>(
    guarded: &'a Guarded<S, C>,
    key: &'a str,
    policy: &'a Policy,
) -> Boxed<'a, ()> {
    match S::CAPABILITIES.reset {
        Some(reset) => Box::pin(guarded.reset_by(reset, key, policy)),
        None => Box::pin(async { Err(Error::Unsupported("reset")) }),
    }
}

/// An admin change (a block, an unblock, a plan, a reset) that the
/// deadline cut short was sent, and may still be made:
/// [`Error::Unconfirmed`] says so.
fn unconfirmed<T>(changed: Result<T, Error>) -> Result<T, Error> {
    match changed {
        Err(error @ Error::Timeout(_)) => Err(Error::Unconfirmed(Box::new(error))),
        other => other,
    }
}
