//! One route's limit, as a [`LimitLayer`](crate::LimitLayer) or
//! `#[rate_limit]` configures it: who a request is for it (its identity,
//! the lists and the block it is on, and its key, written once per
//! request), how its decisions are counted, and the answers it gives
//! without asking the store.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use http::Request;
use http::request::Parts;
use limiter_core::decide::{Counted, NamedLimit};
use limiter_core::{ControlTables, Identity, Key, Policy};

use crate::client_ip::push_ipv4;
use crate::context::Context;
use crate::key::{ClientAddress, KeySource, Source};
use crate::misconfigured::Missing;
use crate::options::{ClientList, CommonOptions, RouteOptions};
use crate::response::RouteFields;

/// One policy and one key source, as a [`LimitLayer`](crate::LimitLayer)
/// or `#[rate_limit]` configures them.
#[derive(Debug, Clone)]
pub(crate) struct RouteLimit {
    /// What every check of the limit takes: its name, its compiled rules,
    /// its failure policy, whether blocks deny it, and its counters.
    pub(crate) named: NamedLimit,
    pub(crate) source: KeySource,
    /// This route's key prefix followed by `:`, instead of the router layer's.
    pub(crate) key_start: Option<Box<str>>,
    pub(crate) message: Option<Box<str>>,
    pub(crate) fields: RouteFields,
    /// Whether allowed requests carry their [`Decision`](limiter_core::Decision).
    pub(crate) decision_extension: bool,
    /// Plans, allow lists, shadow mode, waiting, concurrency, costs: `None`
    /// when none is configured, so a plain limit pays one test for them.
    pub(crate) options: Option<Box<RouteOptions>>,
    /// The router layer's settings when the limit carries them itself
    /// ([`LimitLayer::router_layer`](crate::LimitLayer::router_layer)):
    /// then it looks for no router layer above it.
    pub(crate) context: Option<Arc<Context>>,
}

impl RouteLimit {
    pub(crate) fn new(name: &str, policy: Policy, source: KeySource) -> Self {
        Self {
            fields: RouteFields::new(&policy),
            named: NamedLimit::new(name, policy),
            source,
            key_start: None,
            message: None,
            decision_extension: true,
            options: None,
            context: None,
        }
    }

    /// The limit's name, escaped like an identity.
    #[inline]
    pub(crate) fn name(&self) -> &str {
        &self.named.name
    }

    /// The compiled rules.
    #[inline]
    pub(crate) fn policy(&self) -> &Arc<Policy> {
        &self.named.policy
    }

    /// Counts a denial of the request among the limit's offenders, under
    /// its identity (found again: denials are the cold path). A global
    /// limit's requests have no identity: nothing is counted.
    #[cold]
    #[inline(never)]
    pub(crate) fn record_denial<B>(&self, context: &Context, request: &mut Request<B>) {
        if let Some(identity) = self.typed_identity(context, request) {
            context.shared.record_denial(self.name(), &identity);
        }
    }

    /// Counts one answer of this limit's rate check.
    #[inline]
    pub(crate) fn record(&self, counted: Counted) {
        self.named.record(counted);
    }

    /// Counts one answer of this limit's rate check, apart when a live
    /// override decided it.
    #[inline]
    pub(crate) fn record_as(&self, counted: Counted, overridden: bool) {
        self.named.record_as(counted, overridden);
    }
}

impl RouteLimit {
    /// How long the request stays blocked: the block of its identity for
    /// this limit (`{prefix}:{identity}` under the router layer's prefix,
    /// of the identity's kind), or of its client address, which covers
    /// every limited route of that client. The address is resolved only
    /// while the store holds address blocks.
    #[inline(always)]
    pub(crate) fn block_of<B>(
        &self,
        key: &Key,
        context: &Context,
        request: &Request<B>,
    ) -> Option<Duration> {
        match &context.shared.tables {
            Some(tables) if !tables.blocks().is_empty() => {
                self.block_in_list(tables, key, context, request)
            }
            _ => None,
        }
    }

    /// [`block_of`](Self::block_of) when the store holds blocks.
    #[cold]
    #[inline(never)]
    fn block_in_list<B>(
        &self,
        blocks: &ControlTables,
        key: &Key,
        context: &Context,
        request: &Request<B>,
    ) -> Option<Duration> {
        let own = match (&self.source.0, &self.key_start) {
            (Source::Global, _) => None,
            // The key starts with the block's key: read it in place (this
            // runs on every request while the store holds any block).
            (_, None) => key.identity_key().and_then(|k| blocks.blocked(k)),
            (_, Some(_)) => blocks.blocked(&context.shared.block_key(key)),
        };
        let address = match &self.source.0 {
            // The identity is the address: its block was read above.
            Source::Ip => None,
            // No address is blocked: the client's address is not resolved.
            _ if !blocks.blocks().holds_addresses() => None,
            // A request without its peer address has no address block; its
            // own identity's block still holds.
            _ => client_ip(context, request).and_then(|ip| {
                let mut address_key = String::from(&*context.shared.key_start);
                context.client_ip.push_identity(&mut address_key, ip);
                blocks.blocked(&address_key)
            }),
        };
        own.max(address)
    }

    /// The request's identity for this limit as keys write it (its kind's
    /// marker, its value escaped; an address unescaped by the IPv6
    /// grouping): what identity lists hold ([`ListedIdentity`](crate::ListedIdentity)).
    /// `None` for a global limit, or a request without one.
    pub(crate) fn identity<B>(
        &self,
        context: &Context,
        request: &mut Request<B>,
    ) -> Option<String> {
        let mut text = String::new();
        match &self.source.0 {
            Source::Ip => Identity::ip(client_ip(context, request)?).push_key(&mut text),
            Source::User => {
                let resolve = context.user.as_ref()?;
                let user = with_parts(request, |parts| resolve(parts))?;
                Identity::push_user_key(&mut text, user.as_bytes());
            }
            Source::UserOrIp => {
                let resolve = context.user.as_ref()?;
                match with_parts(request, |parts| resolve(parts)).filter(|u| !u.is_empty()) {
                    Some(user) => Identity::push_user_key(&mut text, user.as_bytes()),
                    None => Identity::ip(client_ip(context, request)?).push_key(&mut text),
                }
            }
            Source::Header(name) => {
                let value = request.headers().get(name)?;
                Identity::push_header_key(&mut text, name.as_str(), value.as_bytes());
            }
            Source::Global => return None,
            Source::Custom(resolve) => {
                note_client_address(context, request);
                let value = with_parts(request, |parts| resolve(parts))?;
                Identity::push_custom_key(&mut text, value.as_bytes());
            }
        }
        Some(text)
    }

    /// The request's identity for this limit, of its kind: an IPv6 client
    /// as the network its keys group it in. `None` for a global limit, or
    /// a request without one.
    pub(crate) fn typed_identity<B>(
        &self,
        context: &Context,
        request: &mut Request<B>,
    ) -> Option<Identity> {
        let present = |value: Option<String>| value.filter(|v| !v.is_empty());
        match &self.source.0 {
            Source::Ip => Some(context.client_ip.identity_of(client_ip(context, request)?)),
            Source::User => {
                let resolve = context.user.as_ref()?;
                let user = present(with_parts(request, |parts| resolve(parts)))?;
                Some(Identity::user(user))
            }
            Source::UserOrIp => {
                let resolve = context.user.as_ref()?;
                match present(with_parts(request, |parts| resolve(parts))) {
                    Some(user) => Some(Identity::user(user)),
                    None => Some(context.client_ip.identity_of(client_ip(context, request)?)),
                }
            }
            Source::Header(name) => {
                let value = request.headers().get(name).filter(|v| !v.is_empty())?;
                Some(Identity::header(name.as_str(), value.as_bytes()))
            }
            Source::Global => None,
            Source::Custom(resolve) => {
                note_client_address(context, request);
                let value = present(with_parts(request, |parts| resolve(parts)))?;
                Some(Identity::custom(value))
            }
        }
    }

    /// What a request lacks when it has no identity for this limit.
    pub(crate) fn identity_name(&self) -> String {
        match &self.source.0 {
            Source::User => "user".to_owned(),
            Source::UserOrIp => "user or client address".to_owned(),
            Source::Header(header) => format!("`{header}` header"),
            _ => "identity".to_owned(),
        }
    }
}

impl RouteLimit {
    /// Whether an allow list, the limit's or the router layer's, lets the
    /// request bypass this limit: its client address (found as for
    /// `by = ip`) or its identity for this limit.
    #[cold]
    #[inline(never)]
    pub(crate) fn bypasses<B>(&self, context: &Context, request: &mut Request<B>) -> bool {
        self.on_list(context, request, |common| &common.allow)
    }

    /// Whether a deny list, the limit's or the router layer's, refuses the
    /// request, found as for [`bypasses`](Self::bypasses).
    pub(crate) fn is_denied<B>(&self, context: &Context, request: &mut Request<B>) -> bool {
        self.on_list(context, request, |common| &common.deny)
    }

    /// Whether the request's client or identity is on the list `list`
    /// picks, of the limit's or the router layer's settings.
    fn on_list<B>(
        &self,
        context: &Context,
        request: &mut Request<B>,
        list: impl Fn(&CommonOptions) -> &ClientList,
    ) -> bool {
        let lists = [
            self.options.as_deref().map(|r| list(&r.common)),
            context.options.as_deref().map(&list),
        ];
        let lists = || lists.into_iter().flatten().filter(|l| !l.is_empty());
        if lists().any(ClientList::has_nets)
            && let Some(ip) = client_ip(context, request)
            && lists().any(|l| l.holds_ip(ip))
        {
            return true;
        }
        if lists().any(ClientList::has_identities)
            && let Some(identity) = self.identity(context, request)
        {
            return lists().any(|l| l.holds_identity(&identity));
        }
        false
    }

    /// Whether the list `list` picks, of the limit's or the router layer's
    /// settings, holds `identity`, for a check made without a request: an
    /// address by the list's networks, any identity by the list's
    /// identities.
    pub(crate) fn lists_identity(
        &self,
        context: &Context,
        identity: &limiter_core::Identity,
        list: impl Fn(&CommonOptions) -> &ClientList,
    ) -> bool {
        let lists = [
            self.options.as_deref().map(|r| list(&r.common)),
            context.options.as_deref().map(&list),
        ];
        let mut lists = lists
            .into_iter()
            .flatten()
            .filter(|l| !l.is_empty())
            .peekable();
        if lists.peek().is_none() {
            return false;
        }
        let mut text = String::new();
        identity.push_key(&mut text);
        let address = identity
            .address()
            .and_then(|(ip, prefix)| prefix.is_none().then_some(ip));
        lists.any(|l| address.is_some_and(|ip| l.holds_ip(ip)) || l.holds_identity(&text))
    }
}

/// Puts the client's address, as `by = ip` finds it, into the request's
/// extensions for a custom resolver to read ([`ClientAddress`]), once.
pub(super) fn note_client_address<B>(context: &Context, request: &mut Request<B>) {
    if request.extensions().get::<ClientAddress>().is_none()
        && let Some(ip) = client_ip(context, request)
    {
        request.extensions_mut().insert(ClientAddress(ip));
    }
}

/// The client's address as `by = ip` finds it, when the request carries
/// its peer address.
pub(crate) fn client_ip<B>(context: &Context, request: &Request<B>) -> Option<IpAddr> {
    let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
    Some(context.client_ip.resolve(peer.ip(), request.headers()))
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

/// Why no key could be built for a request.
pub(crate) enum NoKey {
    /// The request carries no identity of this kind: the client's fault.
    NotInRequest,
    /// The application is not set up for this key source.
    NotSetUp(Missing),
}

impl RouteLimit {
    /// Writes `{prefix}:{identity}:{name}`, or `{prefix}:{name}` for a global
    /// limit, into `key` (its text replaced, so a buffer can be reused).
    pub(crate) fn write_key<B>(
        &self,
        key: &mut Key,
        context: &Context,
        request: &mut Request<B>,
    ) -> Result<(), NoKey> {
        let start = self
            .key_start
            .as_deref()
            .unwrap_or(&context.shared.key_start);
        if let Source::Global = self.source.0 {
            key.set_global(start, self.name());
            return Ok(());
        }
        let mut pushed = Ok(());
        let push = |text: &mut String| pushed = self.push_identity(text, context, request);
        key.set(start, push, self.name());
        pushed
    }

    /// Appends the request's identity for this limit to `key`, as its keys
    /// write it: [`write_key`](Self::write_key)'s identity's part.
    #[inline(always)]
    fn push_identity<B>(
        &self,
        key: &mut String,
        context: &Context,
        request: &mut Request<B>,
    ) -> Result<(), NoKey> {
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
                Identity::push_user_key(key, user.as_bytes());
            }
            Source::UserOrIp => push_user_or_ip(key, context, request)?,
            Source::Header(header) => {
                let value = request
                    .headers()
                    .get(header)
                    .filter(|v| !v.is_empty())
                    .ok_or(NoKey::NotInRequest)?;
                Identity::push_header_key(key, header.as_str(), value.as_bytes());
            }
            // A global limit's key names nobody: `write_key` writes it whole.
            Source::Global => {}
            Source::Custom(resolve) => {
                note_client_address(context, request);
                let identity = present(with_parts(request, |parts| resolve(parts)))
                    .ok_or(NoKey::NotInRequest)?;
                Identity::push_custom_key(key, identity.as_bytes());
            }
        }
        Ok(())
    }
}

/// Writes the user `by = user_or_ip` finds into `key`, else the client's
/// address. Out of line, as [`push_client_ip`]: written in place, either
/// made the `by = ip` path of `write_key` about 180 instructions a request
/// dearer (`http_instructions.sh`, a limit on its route).
#[inline(never)]
fn push_user_or_ip<B>(
    key: &mut String,
    context: &Context,
    request: &mut Request<B>,
) -> Result<(), NoKey> {
    let Some(resolve) = &context.user else {
        return Err(NoKey::NotSetUp(Missing::UserResolver));
    };
    match with_parts(request, |parts| resolve(parts)).filter(|user| !user.is_empty()) {
        Some(user) => Identity::push_user_key(key, user.as_bytes()),
        None => push_client_ip(key, context, request)?,
    }
    Ok(())
}

/// Writes the client's address as `by = ip` keys it (an IPv6 client as its
/// network) into `key`: for a request `by = user_or_ip` finds no user for.
#[inline(never)]
fn push_client_ip<B>(
    key: &mut String,
    context: &Context,
    request: &Request<B>,
) -> Result<(), NoKey> {
    let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() else {
        return Err(NoKey::NotSetUp(Missing::PeerAddress));
    };
    match context.client_ip.resolve(peer.ip(), request.headers()) {
        IpAddr::V4(v4) => push_ipv4(key, v4),
        v6 => context.client_ip.push_identity(key, v6),
    }
    Ok(())
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
            let ip: std::net::Ipv4Addr = ip.parse().unwrap();
            let mut key = String::from("k:");
            client_ip.push_identity(&mut key, IpAddr::V4(ip));
            assert_eq!(key, format!("k:{ip}"));
        }
    }
}
