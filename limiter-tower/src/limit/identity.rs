//! Who a request is for a limit: the key it is counted under, and the
//! identity allow lists are matched against.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::extract::ConnectInfo;
use http::Request;
use http::request::Parts;
use limiter_core::{Identity, Key};

use super::route::RouteLimit;
use crate::client_ip::push_ipv4;
use crate::context::{BlockCheck, Context};
use crate::key::Source;
use crate::misconfigured::Missing;

/// Why no key could be built for a request.
pub(crate) enum NoKey {
    /// The request carries no identity of this kind: the client's fault.
    NotInRequest,
    /// The application is not set up for this key source.
    NotSetUp(Missing),
}

impl RouteLimit {
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
                Identity::push_user_key(key, user.as_bytes());
            }
            Source::Header(header) => {
                let value = request
                    .headers()
                    .get(header)
                    .filter(|v| !v.is_empty())
                    .ok_or(NoKey::NotInRequest)?;
                Identity::push_header_key(key, header.as_str(), value.as_bytes());
            }
            Source::Global => {
                key.push_str(&self.name);
                return Ok(());
            }
            Source::Custom(resolve) => {
                let identity = present(with_parts(request, |parts| resolve(parts)))
                    .ok_or(NoKey::NotInRequest)?;
                Identity::push_custom_key(key, identity.as_bytes());
            }
        }
        key.push(':');
        key.push_str(&self.name);
        Ok(())
    }

    /// How long the request stays blocked: the block of its identity for
    /// this limit (`{prefix}:{identity}` under the router layer's prefix,
    /// of the identity's kind), or of its client address, which covers
    /// every limited route of that client. The address is resolved only
    /// while the store holds address blocks.
    #[inline(always)]
    pub(crate) fn block_of<B>(
        &self,
        key: &str,
        context: &Context,
        request: &Request<B>,
    ) -> Option<Duration> {
        match &context.blocks {
            BlockCheck::List(list) if list.is_empty() => None,
            BlockCheck::None => None,
            _ => self.block_in_list(key, context, request),
        }
    }

    /// [`block_of`](Self::block_of) when the store holds blocks.
    #[cold]
    #[inline(never)]
    fn block_in_list<B>(
        &self,
        key: &str,
        context: &Context,
        request: &Request<B>,
    ) -> Option<Duration> {
        let blocks = context.store.capabilities().as_blocks()?;
        let own = match (&self.source.0, &self.key_start) {
            (Source::Global, _) => None,
            // The key starts with the block's key: read it in place (this
            // runs on every request while the store holds any block).
            (_, None) => Key::identity_key_in(key, &self.name).and_then(|k| blocks.blocked(k)),
            (_, Some(_)) => blocks.blocked(&self.block_key(key, context)),
        };
        let address = match (&self.source.0, &context.blocks) {
            // The identity is the address: its block was read above.
            (Source::Ip, _) => None,
            // No address is blocked: the client's address is not resolved.
            (_, BlockCheck::List(list)) if !list.holds_addresses() => None,
            // A request without its peer address has no address block; its
            // own identity's block still holds.
            _ => client_ip(context, request).and_then(|ip| {
                let mut address_key = String::from(&*context.key_start);
                context.client_ip.push_identity(&mut address_key, ip);
                blocks.blocked(&address_key)
            }),
        };
        own.max(address)
    }

    /// The key of the block of `key`'s identity (see [`block_of`](Self::block_of)).
    pub(crate) fn block_key(&self, key: &str, context: &Context) -> String {
        let start = self.key_start.as_deref().unwrap_or(&context.key_start);
        let mut block_key = String::from(&*context.key_start);
        block_key.push_str(Key::identity_part_in(key, start, &self.name).unwrap_or_default());
        block_key
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
            Source::Header(name) => {
                let value = request.headers().get(name)?;
                Identity::push_header_key(&mut text, name.as_str(), value.as_bytes());
            }
            Source::Global => return None,
            Source::Custom(resolve) => {
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
            Source::Header(name) => {
                let value = request.headers().get(name).filter(|v| !v.is_empty())?;
                Some(Identity::header(name.as_str(), value.as_bytes()))
            }
            Source::Global => None,
            Source::Custom(resolve) => {
                let value = present(with_parts(request, |parts| resolve(parts)))?;
                Some(Identity::custom(value))
            }
        }
    }

    /// What a request lacks when it has no identity for this limit.
    pub(crate) fn identity_name(&self) -> String {
        match &self.source.0 {
            Source::User => "user".to_owned(),
            Source::Header(header) => format!("`{header}` header"),
            _ => "identity".to_owned(),
        }
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
