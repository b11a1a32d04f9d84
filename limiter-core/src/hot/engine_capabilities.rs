//! `HotKeys` as a store: its table of capabilities (each forwarded to the
//! wrapped store's, the check and the reset through the hot-key modes),
//! and the capability traits it implements when the wrapped store does.

use super::*;

impl<S: Store> Store for HotKeys<S> {
    const CAPABILITIES: Capabilities<Self> = {
        let inner = &S::CAPABILITIES;
        let caps = if inner.is_remote() {
            Capabilities::REMOTE
        } else {
            Capabilities::LOCAL
        };
        let caps = caps
            .honouring_hot_keys()
            .with_permit_op(if inner.has_permits() {
                Some(forward_permit::<S>)
            } else {
                None
            })
            .with_resets(if inner.resets.is_some() {
                Some(forward_on_reset::<S>)
            } else {
                None
            })
            .with_plan_ops(if inner.has_plan_assignments() {
                Some(PlanOps {
                    assign: forward_assign::<S>,
                    assigned: forward_assigned::<S>,
                    count: forward_count::<S>,
                })
            } else {
                None
            })
            .with_refund_ops(if inner.has_refunds() {
                Some(RefundOps {
                    check: forward_check_refundable::<S>,
                    refund: forward_refund::<S>,
                })
            } else {
                None
            })
            .with_penalize_op(if inner.has_penalties() {
                Some(forward_penalize::<S>)
            } else {
                None
            })
            .with_block_ops(if inner.has_blocks() {
                Some(BlockOps {
                    block: forward_block::<S>,
                    unblock: forward_unblock::<S>,
                    blocked: forward_blocked::<S>,
                    list: forward_list::<S>,
                })
            } else {
                None
            })
            .with_control_ops(
                if inner.has_peek() {
                    Some(forward_peek::<S>)
                } else {
                    None
                },
                if inner.has_reset() {
                    Some(forward_reset::<S>)
                } else {
                    None
                },
            );
        if inner.is_guarded() {
            caps.guarded_by(GuardOps {
                check: guarded_verdict::<S>,
                permit: if inner.has_guarded_permits() {
                    Some(forward_guarded_permit::<S>)
                } else {
                    None
                },
                check_refundable: if inner.has_refunds() {
                    Some(forward_guarded_refundable::<S>)
                } else {
                    None
                },
            })
        } else {
            caps
        }
    };

    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        (self.verdict(key, policy, cost, None).await?).into_decision(policy)
    }

    fn try_check_now(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Option<Result<Decision, Error>> {
        // A hot-key mode keeps state of its own: it is awaited.
        if policy.hot_key().is_some() {
            return None;
        }
        self.store.try_check_now(key, policy, cost)
    }
}

impl<S: Peek> Peek for HotKeys<S> {
    async fn peek(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.peek_by(peek_of::<S>, key, policy, cost).await
    }
}

/// Requests counted by outcome go to the store directly: a hot-key mode's
/// local state (a lease, a sample) could not give one back.
impl<S: Refunds> Refunds for HotKeys<S> {
    async fn check_refundable(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error> {
        self.store.check_refundable(key, policy, cost).await
    }

    async fn refund(
        &self,
        key: &str,
        policy: &Policy,
        receipt: &crate::Receipt,
    ) -> Result<(), Error> {
        self.store.refund(key, policy, receipt).await
    }
}

impl<S: Blocks> Blocks for HotKeys<S> {
    async fn block(
        &self,
        key: &str,
        duration: std::time::Duration,
        origin: crate::BlockOrigin,
    ) -> Result<(), Error> {
        self.store.block(key, duration, origin).await
    }

    async fn unblock(&self, key: &str) -> Result<(), Error> {
        self.store.unblock(key).await
    }

    fn blocked(&self, key: &str) -> Option<std::time::Duration> {
        self.store.blocked(key)
    }

    fn block_list(&self) -> Option<Arc<crate::BlockList>> {
        self.store.block_list()
    }
}

impl<S: Reset> Reset for HotKeys<S> {
    async fn reset(&self, key: &str, policy: &Policy) -> Result<(), Error> {
        self.reset_by(reset_of::<S>, key, policy).await
    }
}

impl<S: Permits> Permits for HotKeys<S> {
    async fn acquire_permit(&self, key: &str, limit: &ConcurrencyLimit) -> Result<Acquired, Error> {
        self.store.acquire_permit(key, limit).await
    }
}

// The table's entries: each reached only when the wrapped store has what
// it forwards to.

fn forward_permit<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    limit: &'a ConcurrencyLimit,
) -> Boxed<'a, Acquired> {
    match S::CAPABILITIES.permits {
        Some(permit) => permit(&hot.store, key, limit),
        None => Box::pin(async { Err(Error::Unsupported("concurrency limits")) }),
    }
}

fn forward_assign<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    plan: Option<&'a str>,
) -> Boxed<'a, ()> {
    match ask::assign_plan(&*hot.store, key, plan) {
        Some(assign) => assign,
        None => Box::pin(async { Err(Error::Unsupported("plan assignments")) }),
    }
}

fn forward_assigned<S: Store>(hot: &HotKeys<S>, key: &str) -> Option<Arc<str>> {
    S::CAPABILITIES.assigned_plan(&hot.store, key)
}

fn forward_count<S: Store>(hot: &HotKeys<S>) -> usize {
    S::CAPABILITIES.assigned_plans(&hot.store)
}

fn forward_penalize<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    penalty: &'a crate::Penalty,
) -> Boxed<'a, Option<std::time::Duration>> {
    match ask::penalize(&*hot.store, key, penalty) {
        Some(penalize) => penalize,
        None => Box::pin(async { Err(Error::Unsupported("penalties")) }),
    }
}

fn forward_block<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    duration: std::time::Duration,
    origin: crate::BlockOrigin,
) -> Boxed<'a, ()> {
    match ask::block(&*hot.store, key, duration, origin) {
        Some(block) => block,
        None => Box::pin(async { Err(Error::Unsupported("blocks")) }),
    }
}

fn forward_unblock<'a, S: Store>(hot: &'a HotKeys<S>, key: &'a str) -> Boxed<'a, ()> {
    match ask::unblock(&*hot.store, key) {
        Some(unblock) => unblock,
        None => Box::pin(async { Err(Error::Unsupported("blocks")) }),
    }
}

fn forward_list<S: Store>(hot: &HotKeys<S>) -> Option<Arc<crate::BlockList>> {
    S::CAPABILITIES.block_list(&hot.store)
}

fn forward_blocked<S: Store>(hot: &HotKeys<S>, key: &str) -> Option<std::time::Duration> {
    S::CAPABILITIES.blocked(&hot.store, key)
}

fn forward_on_reset<S: Store>(hot: &HotKeys<S>, forget: Forgetter) {
    S::CAPABILITIES.on_reset(&hot.store, forget);
}

fn forward_peek<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Boxed<'a, Decision> {
    match S::CAPABILITIES.peek {
        Some(peek) => Box::pin(hot.peek_by(peek, key, policy, cost)),
        None => Box::pin(async { Err(Error::Unsupported("peek")) }),
    }
}

fn forward_reset<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    policy: &'a Policy,
) -> Boxed<'a, ()> {
    match S::CAPABILITIES.reset {
        Some(reset) => Box::pin(hot.reset_by(reset, key, policy)),
        None => Box::pin(async { Err(Error::Unsupported("reset")) }),
    }
}

fn forward_guarded_permit<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    limit: &'a ConcurrencyLimit,
    on_error: Option<OnStoreError>,
) -> Boxed<'a, Acquired> {
    match ask::permit(&*hot.store, key, limit, on_error) {
        Some(permit) => permit,
        None => Box::pin(async { Err(Error::Unsupported("concurrency limits")) }),
    }
}

fn guarded_verdict<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Boxed<'a, Verdict> {
    Box::pin(hot.verdict(key, policy, cost, on_error))
}

fn forward_check_refundable<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
) -> Boxed<'a, (Decision, Option<crate::Receipt>)> {
    match S::CAPABILITIES.refunds.as_ref() {
        Some(ops) => (ops.check)(&*hot.store, key, policy, cost),
        None => Box::pin(async { Err(Error::Unsupported("refunds")) }),
    }
}

fn forward_refund<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    policy: &'a Policy,
    receipt: &'a crate::Receipt,
) -> Boxed<'a, ()> {
    match ask::refund(&*hot.store, key, policy, receipt) {
        Some(refund) => refund,
        None => Box::pin(async { Err(Error::Unsupported("refunds")) }),
    }
}

fn forward_guarded_refundable<'a, S: Store>(
    hot: &'a HotKeys<S>,
    key: &'a str,
    policy: &'a Policy,
    cost: u64,
    on_error: Option<OnStoreError>,
) -> Boxed<'a, (Verdict, Option<crate::Receipt>)> {
    match ask::check_refundable(&*hot.store, key, policy, cost, on_error) {
        Some(check) => check,
        None => Box::pin(async { Err(Error::Unsupported("refunds")) }),
    }
}
