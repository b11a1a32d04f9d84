//! A limit's one admission path: find the request's key, what it is
//! checked with, ask the store, and turn the answer into a call of the
//! service below or a response ([`answer`](RouteLimit::answer)). A store
//! that decides at once is answered here, with a key buffer this thread
//! reuses and no future; any other answer is awaited in the limit's future.

use std::cell::Cell;
use std::sync::Arc;

use http::Request;
use tower_service::Service;

use super::ResponseFuture;
use super::admission::{Checks, admit};
use super::answer::Reading;
use super::checks::RequestChecks;
use super::counters::Counted;
use super::future::Next;
use super::route::RouteLimit;
use crate::context::Context;
use crate::misconfigured::Missing;
use crate::scope::Current;

thread_local! {
    /// The key buffer of this thread's checks, reused so that a check on a
    /// store that decides at once allocates no key.
    static KEY_BUFFER: Cell<String> = const { Cell::new(String::new()) };
}

impl RouteLimit {
    /// Admits a request under the router layer's context (the limit's own,
    /// or the one in scope), and
    /// answers with the future of what follows: `inner` called (it is
    /// ready), the limiter's own response, or the wait for a store that
    /// does not decide at once.
    pub(crate) fn call<S, B>(
        self: &Arc<Self>,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        // The scope is whole again before `inner` is called: a limit below
        // this one takes the context in its turn.
        let next = self.next(&mut request);
        // The allowed request's path on its own, so that the request moves
        // once, into `inner`'s call, and its future straight into ours.
        match next {
            Next::Proceed {
                fields,
                delay,
                after,
            } if delay.is_zero() => ResponseFuture::calling(inner.call(request), fields, after),
            next => ResponseFuture::new(inner, request, next),
        }
    }

    /// What follows a request's admission: under the limit's own context,
    /// or the one taken from the scope meanwhile.
    #[inline(always)]
    fn next<B>(self: &Arc<Self>, request: &mut Request<B>) -> Next {
        let current;
        let context = match &self.context {
            Some(own) => own,
            None => {
                current = Current::take();
                let Some(context) = current.context() else {
                    return self.misconfigured(Missing::RouterLayer, request);
                };
                context
            }
        };
        let business = self.business.is_some() || context.business.is_some();
        if business && self.is_denied(context, request) {
            return self.deny_listed(request);
        }
        // An allowed client needs no identity for this limit.
        if business && self.bypasses(context, request) {
            self.record(Counted::Bypassed);
            return Next::UNCHECKED;
        }
        let mut key = KEY_BUFFER.take();
        if let Err(no_key) = self.write_key(&mut key, context, request) {
            KEY_BUFFER.set(key);
            return self.refuse(no_key, context, request);
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(limit = %self.name, %key, "checking");
        }
        if self.honours_blocks
            && let Some(left) = self.block_of(&key, context, request)
        {
            let next = self.blocked(left, context, request);
            KEY_BUFFER.set(key);
            return next;
        }
        // The override itself is looked up on the cold path: the plain
        // path holds nothing to drop.
        let (cost, reading) = if business || self.may_be_overridden(context) {
            let checks = match self.business_checks(context, request) {
                Ok(Some(checks)) => checks,
                not_checked => {
                    KEY_BUFFER.set(key);
                    return match not_checked {
                        Err(refused) => Next::Respond(refused),
                        Ok(_) => Next::UNCHECKED,
                    };
                }
            };
            // A permit to take, or waiting: awaited.
            let Some(cost) = checks.at_once() else {
                return self.pending(context, key, checks);
            };
            (cost, checks.reading)
        } else {
            (self.policy.cost(), Reading::plain(context.headers))
        };
        // The decision step of `answer`, without wrapping the decision,
        // read where the store wrote it.
        let next = match &context.store.check_now(&key, reading.policy(self), cost) {
            Some(Ok(decision)) => {
                let counted = Counted::by_store(decision);
                self.on_decision(decision, counted, context, &reading, request)
            }
            Some(Err(error)) => self.failed(error, &reading, request.headers()),
            None => {
                let checks = RequestChecks::rate(cost, reading);
                return self.pending(context, key, checks);
            }
        };
        KEY_BUFFER.set(key);
        next
    }

    /// The wait for the store's answer.
    fn pending(
        self: &Arc<Self>,
        context: &Arc<Context>,
        key: String,
        checks: RequestChecks,
    ) -> Next {
        let policy = checks.reading.policy(self);
        let rate = checks.cost.map(|cost| (Arc::clone(policy), cost));
        let penalty = checks
            .penalty
            .map(|penalty| (penalty, self.block_key(&key, context)));
        let pending = admit(Checks {
            store: Arc::clone(&context.store),
            key,
            rate,
            concurrency: checks.concurrency,
            // `None`: the failure policy of whoever guards the store.
            on_error: self.on_store_error.or(context.on_store_error),
            waiters: checks.wait.map(|max| (context.waiters.clone(), max.get())),
            shadow: checks.reading.shadow,
            penalty,
            count_when: checks.count_when,
        });
        Next::Check {
            pending,
            limit: Arc::clone(self),
            reading: checks.reading,
            context: Arc::clone(context),
        }
    }
}
