//! Whose quota a request uses: the key source, and the store key built from it.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use http::request::Parts;
use http::{HeaderName, Request};
use limiter_core::{push_identity, push_identity_bytes};

use crate::context::Context;

/// Finds an identity in a request: `Some(identity)`, or `None` when the
/// request has none (the request is then refused, see
/// [`RateLimitLayer::missing_identity_status`](crate::RateLimitLayer::missing_identity_status)).
pub type Resolver = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// What a limit counts by: whose quota a request uses.
///
/// | source | identity |
/// |---|---|
/// | [`ip`](Self::ip) | the client address: the peer (`ConnectInfo<SocketAddr>`), or behind [trusted proxies](crate::RateLimitLayer::trusted_proxies) the forwarded client; IPv6 grouped by prefix |
/// | [`user`](Self::user) | what the layer's [user resolver](crate::RateLimitLayer::user) returns |
/// | [`header`](Self::header) | the value of a request header, such as an API key |
/// | [`global`](Self::global) | none: one quota shared by every client |
/// | [`custom`](Self::custom) | what your function returns |
///
/// A request without the identity (no user, no header) is refused with 401
/// by default: it never silently falls into one shared bucket.
#[derive(Clone)]
pub struct KeySource(pub(crate) Source);

#[derive(Clone)]
pub(crate) enum Source {
    Ip,
    User,
    Header(HeaderName),
    Global,
    Custom(Resolver),
}

impl KeySource {
    /// By client IP address.
    pub fn ip() -> Self {
        Self(Source::Ip)
    }

    /// By the user the layer's resolver finds.
    pub fn user() -> Self {
        Self(Source::User)
    }

    /// By the value of the header `name` (for example `x-api-key`).
    pub fn header(name: HeaderName) -> Self {
        Self(Source::Header(name))
    }

    /// One quota for everyone.
    pub fn global() -> Self {
        Self(Source::Global)
    }

    /// By what `resolve` returns for the request's parts.
    pub fn custom(resolve: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Source::Custom(Arc::new(resolve)))
    }
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::Ip => f.write_str("KeySource::ip()"),
            Source::User => f.write_str("KeySource::user()"),
            Source::Header(name) => write!(f, "KeySource::header({name:?})"),
            Source::Global => f.write_str("KeySource::global()"),
            Source::Custom(_) => f.write_str("KeySource::custom(..)"),
        }
    }
}

/// Why no key could be built for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoKey {
    /// The request carries no identity of this kind: the client's fault.
    Missing(String),
    /// The application is not set up for this key source: the server's fault.
    Misconfigured(&'static str),
}

/// Writes `{prefix}:{identity}:{name}`, or `{prefix}:{name}` for a global
/// limit, into `key` (cleared first, so a buffer can be reused).
pub(crate) fn build_key<B>(
    key: &mut String,
    context: &Context,
    source: &KeySource,
    prefix: Option<&str>,
    name: &str,
    request: &mut Request<B>,
) -> Result<(), NoKey> {
    let prefix = prefix.unwrap_or(&context.prefix);
    key.clear();
    key.reserve(prefix.len() + name.len() + 48);
    key.push_str(prefix);
    key.push(':');
    let present = |identity: Option<String>| identity.filter(|i| !i.is_empty());
    match &source.0 {
        Source::Ip => {
            let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>()
            else {
                return Err(NoKey::Misconfigured(
                    "the client address is unknown: serve the app with \
                     `into_make_service_with_connect_info::<SocketAddr>()`",
                ));
            };
            let client = context.client_ip.resolve(peer.ip(), request.headers());
            context.client_ip.push_identity(key, client);
            key.push(':');
        }
        Source::User => {
            let Some(resolve) = &context.user else {
                return Err(NoKey::Misconfigured(
                    "a limit counts by user but the RateLimitLayer has no user resolver: \
                     set one with `RateLimitLayer::user`",
                ));
            };
            let user = present(with_parts(request, |parts| resolve(parts)))
                .ok_or_else(|| NoKey::Missing("user".into()))?;
            push_identity(key, &user);
            key.push(':');
        }
        Source::Header(header) => {
            let value = request
                .headers()
                .get(header)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| NoKey::Missing(format!("`{header}` header")))?;
            push_identity_bytes(key, value.as_bytes());
            key.push(':');
        }
        Source::Global => {}
        Source::Custom(resolve) => {
            let identity = present(with_parts(request, |parts| resolve(parts)))
                .ok_or_else(|| NoKey::Missing("identity".into()))?;
            push_identity(key, &identity);
            key.push(':');
        }
    }
    key.push_str(name);
    Ok(())
}

/// Runs `f` on the request's head as [`Parts`], which resolvers take, and
/// puts the head back: the request stays whole, whatever its body type.
fn with_parts<B, R>(request: &mut Request<B>, f: impl FnOnce(&Parts) -> R) -> R {
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
