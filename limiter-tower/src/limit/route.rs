//! One route's limit, data and behaviour: what it counts by, how it builds
//! a request's key, asks the store, and turns the answer into a call of the
//! service below or a response. [`Limit`](super::Limit) hands requests to it,
//! and its future only sequences the steps it chose.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use http::Request;
use http::request::Parts;
use limiter_core::{Decision, Error, OnStoreError, Policy, Verdict, push_identity_bytes};
use tower_service::Service;

use super::ResponseFuture;
use super::counters::{Counted, DecisionCounters, ShadowCounter};
use super::future::Waiting;
use crate::business::RouteBusiness;
use crate::context::{Context, HeaderOptions};
use crate::key::{KeySource, Source};
use crate::misconfigured::Missing;
use crate::response::{self, Protocol, RouteFields};
use crate::scope::Current;

thread_local! {
    /// The key buffer of this thread's checks, reused so that a check on a
    /// store that decides at once allocates no key.
    static KEY_BUFFER: Cell<String> = const { Cell::new(String::new()) };
}

/// One policy and one key source, as a [`LimitLayer`](crate::LimitLayer)
/// or `#[rate_limit]` configures them.
#[derive(Debug, Clone)]
pub(crate) struct RouteLimit {
    /// The last part of the keys, escaped like an identity.
    pub(crate) name: Box<str>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) source: KeySource,
    /// This route's key prefix followed by `:`, instead of the router layer's.
    pub(crate) key_start: Option<Box<str>>,
    pub(crate) message: Option<Box<str>>,
    pub(crate) on_store_error: Option<OnStoreError>,
    pub(crate) fields: RouteFields,
    pub(crate) counters: DecisionCounters,
    /// Whether allowed requests carry their [`Decision`].
    pub(crate) decision_extension: bool,
    /// Plans, allow lists, shadow mode, waiting, concurrency, costs: `None`
    /// when none is configured, so a plain limit pays one test for them.
    pub(crate) business: Option<Box<RouteBusiness>>,
    pub(crate) shadow_counter: ShadowCounter,
}

/// Why no key could be built for a request.
pub(crate) enum NoKey {
    /// The request carries no identity of this kind: the client's fault.
    NotInRequest,
    /// The application is not set up for this key source.
    NotSetUp(Missing),
}

impl RouteLimit {
    pub(crate) fn new(name: &str, policy: Policy, source: KeySource) -> Self {
        let mut escaped = String::new();
        limiter_core::push_identity(&mut escaped, name);
        Self {
            name: escaped.into(),
            fields: RouteFields::new(&policy),
            policy: Arc::new(policy),
            source,
            key_start: None,
            message: None,
            on_store_error: None,
            counters: DecisionCounters::default(),
            decision_extension: true,
            business: None,
            shadow_counter: ShadowCounter::default(),
        }
    }

    /// Checks a request with the router layer's context in scope, and
    /// answers with the future of what follows: `inner` called (it is ready),
    /// the limiter's own response, or the wait for a store that does not
    /// decide at once (the memory store does: no future, no owned key).
    pub(crate) fn call<S, B>(
        self: &Arc<Self>,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let current = Current::take();
        let Some(context) = current.context() else {
            return self.misconfigured(Missing::RouterLayer, &request);
        };
        if self.business.is_some() || context.business.is_some() {
            return self.call_extended(current, inner, request);
        }
        let headers = context.headers;
        let mut key = KEY_BUFFER.take();
        if let Err(no_key) = self.write_key(&mut key, context, &mut request) {
            KEY_BUFFER.set(key);
            return self.refuse(no_key, context, &request);
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(limit = %self.name, %key, "checking");
        }
        let cost = self.policy.cost();
        if let Some(decided) = context.store.check_now(&key, &self.policy, cost) {
            KEY_BUFFER.set(key);
            // The scope is whole again before `inner` is called: a limit
            // below this one takes the context in its turn.
            drop(current);
            return match decided {
                Ok(decision) => {
                    let counted = Counted::by_store(&decision);
                    self.on_decision(&decision, counted, headers, inner, request)
                }
                Err(error) => self.on_error(error, &request),
            };
        }
        // `None`: the failure policy of whoever guards the store.
        let on_error = self.on_store_error.or(context.on_store_error);
        let check =
            Arc::clone(&context.store).check_owned(key, Arc::clone(&self.policy), cost, on_error);
        // The clone is not ready; keep it and use the one that is.
        let clone = inner.clone();
        ResponseFuture::checking(
            check,
            Waiting {
                inner: std::mem::replace(inner, clone),
                request,
                headers,
                limit: Arc::clone(self),
            },
        )
    }

    /// What follows a store's answer that was awaited; `inner` is ready.
    pub(crate) fn decide<S, B>(
        &self,
        verdict: Result<Verdict, Error>,
        headers: HeaderOptions,
        inner: &mut S,
        request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        let verdict = match verdict {
            Ok(verdict) => verdict,
            Err(error) => return self.on_error(error, &request),
        };
        let counted = Counted::of(&verdict);
        match verdict {
            Verdict::FailedOpen => {
                self.record(counted);
                // No decision, so no headers.
                ResponseFuture::proceed(inner, request, None, Duration::ZERO)
            }
            Verdict::FailedClosed { retry_after } => {
                self.record(counted);
                let protocol = Protocol::of(request.headers());
                ResponseFuture::respond(response::unavailable(protocol, retry_after))
            }
            verdict => match verdict.decision() {
                Some(decision) => self.on_decision(decision, counted, headers, inner, request),
                None => {
                    self.record(Counted::Other);
                    ResponseFuture::proceed(inner, request, None, Duration::ZERO)
                }
            },
        }
    }

    /// The answer to a request no key could be built for.
    pub(crate) fn refuse<S, B>(
        &self,
        no_key: NoKey,
        context: &Context,
        request: &Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        match no_key {
            NoKey::NotInRequest => ResponseFuture::respond(response::problem(
                Protocol::of(request.headers()),
                context.missing_identity,
                &format!(
                    "This route is rate limited per {}, and the request carries none.",
                    self.identity_name()
                ),
            )),
            NoKey::NotSetUp(missing) => self.misconfigured(missing, request),
        }
    }

    /// What a request lacks when it has no identity for this limit.
    fn identity_name(&self) -> String {
        match &self.source.0 {
            Source::User => "user".to_owned(),
            Source::Header(header) => format!("`{header}` header"),
            _ => "identity".to_owned(),
        }
    }

    #[inline]
    pub(crate) fn record(&self, counted: Counted) {
        self.counters
            .record(counted, || self.policy.algorithm().name(), &self.name);
    }

    /// Proceeds with the fields, or answers 429.
    #[inline]
    fn on_decision<S, B>(
        &self,
        decision: &Decision,
        counted: Counted,
        options: HeaderOptions,
        inner: &mut S,
        mut request: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        self.record(counted);
        if decision.allowed() {
            let headers = options
                .on_allowed
                .then(|| self.fields.of(decision, options));
            if self.decision_extension {
                request.extensions_mut().insert(*decision);
            }
            return ResponseFuture::proceed(inner, request, headers, decision.delay());
        }
        tracing::debug!(
            limit = %self.name,
            rule = %decision.rule(),
            retry_after = ?decision.retry_after(),
            "rate limited"
        );
        ResponseFuture::respond(response::too_many_requests(
            Protocol::of(request.headers()),
            decision,
            &self.policy.names(),
            self.policy.cost(),
            self.fields.of(decision, options),
            self.message.as_deref(),
        ))
    }

    pub(crate) fn on_error<S, B>(&self, error: Error, request: &Request<B>) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        self.record(Counted::Error);
        tracing::error!(limit = %self.name, %error, "the rate limiter failed");
        let protocol = Protocol::of(request.headers());
        ResponseFuture::respond(response::unavailable(protocol, Duration::from_secs(1)))
    }

    pub(crate) fn misconfigured<S, B>(
        &self,
        missing: Missing,
        request: &Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        ResponseFuture::respond(missing.response(&self.name, Protocol::of(request.headers())))
    }

    /// Writes `{prefix}:{identity}:{name}`, or `{prefix}:{name}` for a global
    /// limit, into `key` (cleared first, so a buffer can be reused).
    pub(crate) fn write_key<B>(
        &self,
        key: &mut String,
        context: &Context,
        request: &mut Request<B>,
    ) -> Result<(), NoKey> {
        let start = self.key_start.as_deref().unwrap_or(&context.key_start);
        key.clear();
        key.reserve(start.len() + self.name.len() + 48);
        key.push_str(start);
        let present = |identity: Option<String>| identity.filter(|i| !i.is_empty());
        match &self.source.0 {
            Source::Ip => {
                let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>()
                else {
                    return Err(NoKey::NotSetUp(Missing::PeerAddress));
                };
                match context.client_ip.resolve(peer.ip(), request.headers()) {
                    IpAddr::V4(v4) => push_ipv4(key, v4),
                    v6 => context.client_ip.push_identity(key, v6),
                }
            }
            Source::User => {
                let Some(resolve) = &context.user else {
                    return Err(NoKey::NotSetUp(Missing::UserResolver));
                };
                let user = present(with_parts(request, |parts| resolve(parts)))
                    .ok_or(NoKey::NotInRequest)?;
                push_identity_bytes(key, user.as_bytes());
            }
            Source::Header(header) => {
                let value = request
                    .headers()
                    .get(header)
                    .filter(|v| !v.is_empty())
                    .ok_or(NoKey::NotInRequest)?;
                push_identity_bytes(key, value.as_bytes());
            }
            Source::Global => {
                key.push_str(&self.name);
                return Ok(());
            }
            Source::Custom(resolve) => {
                let identity = present(with_parts(request, |parts| resolve(parts)))
                    .ok_or(NoKey::NotInRequest)?;
                push_identity_bytes(key, identity.as_bytes());
            }
        }
        key.push(':');
        key.push_str(&self.name);
        Ok(())
    }
}

/// Appends an IPv4 address in dotted decimal, its identity: digits and dots
/// need no escaping. (This runs on every request limited by IP: pushing
/// ASCII characters one by one costs a third of formatting the address or
/// validating a buffer as UTF-8.)
#[inline]
fn push_ipv4(key: &mut String, ip: Ipv4Addr) {
    let digit = |d: u8| char::from(b'0' + d);
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            key.push('.');
        }
        if octet >= 100 {
            key.push(digit(octet / 100));
        }
        if octet >= 10 {
            key.push(digit(octet / 10 % 10));
        }
        key.push(digit(octet % 10));
    }
}

/// Runs `f` on the request's head as [`Parts`], which resolvers take, and
/// puts the head back: the request stays whole, whatever its body type.
pub(crate) fn with_parts<B, R>(request: &mut Request<B>, f: impl FnOnce(&Parts) -> R) -> R {
    let (mut parts, ()) = Request::new(()).into_parts();
    let swap = |parts: &mut Parts, request: &mut Request<B>| {
        std::mem::swap(&mut parts.method, request.method_mut());
        std::mem::swap(&mut parts.uri, request.uri_mut());
        std::mem::swap(&mut parts.version, request.version_mut());
        std::mem::swap(&mut parts.headers, request.headers_mut());
        std::mem::swap(&mut parts.extensions, request.extensions_mut());
    };
    swap(&mut parts, request);
    let result = f(&parts);
    swap(&mut parts, request);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_ip::ClientIp;

    #[test]
    fn ipv4_identities_are_the_client_ips_own() {
        let client_ip = ClientIp::default();
        for ip in [
            "0.0.0.0",
            "9.10.99.100",
            "203.0.113.7",
            "255.255.255.255",
            "10.0.0.1",
        ] {
            let ip: Ipv4Addr = ip.parse().unwrap();
            let (mut fast, mut general) = (String::from("k:"), String::from("k:"));
            push_ipv4(&mut fast, ip);
            client_ip.push_identity(&mut general, IpAddr::V4(ip));
            assert_eq!(fast, general);
        }
    }
}
