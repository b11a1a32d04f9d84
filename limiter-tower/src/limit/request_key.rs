//! The key of a request for a limit, `{prefix}:{identity}:{name}`,
//! written once per request into the thread's key buffer; and why none
//! could be written.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use http::Request;
use limiter_core::{Identity, Key};

use super::route::{RouteLimit, note_client_address, with_parts};
use crate::client_ip::push_ipv4;
use crate::context::Context;
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
    /// limit, into `key` (its text replaced, so a buffer can be reused).
    pub(crate) fn write_key<B>(
        &self,
        key: &mut Key,
        context: &Context,
        request: &mut Request<B>,
    ) -> Result<(), NoKey> {
        let start = self.key_start.as_deref().unwrap_or(&context.key_start);
        if let Source::Global = self.source.0 {
            key.set_global(start, &self.name);
            return Ok(());
        }
        let mut pushed = Ok(());
        let push = |text: &mut String| pushed = self.push_identity(text, context, request);
        key.set(start, push, &self.name);
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
