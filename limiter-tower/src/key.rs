//! Whose quota a request uses: the key source a limit counts by.

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use http::request::Parts;

/// Finds an identity in a request: `Some(identity)`, or `None` when the
/// request has none (the request is then refused, see
/// [`LimiterLayer::missing_identity_status`](crate::LimiterLayer::missing_identity_status)).
pub type Resolver = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// What a limit counts by: whose quota a request uses.
///
/// | source | identity | needs |
/// |---|---|---|
/// | [`ip`](Self::ip) | the client address: the peer, or behind [trusted proxies](crate::LimiterLayer::trusted_proxies) the forwarded client; IPv6 grouped by prefix | the peer address in the request, `ConnectInfo<SocketAddr>` (axum's `into_make_service_with_connect_info::<SocketAddr>()`) |
/// | [`user`](Self::user) | what the router layer's resolver returns | a [user resolver](crate::LimiterLayer::user) |
/// | [`header`](Self::header) | the value of a request header, such as an API key | |
/// | [`global`](Self::global) | none: one quota shared by every client | |
/// | [`custom`](Self::custom) | what your function returns | |
///
/// A request without the identity (no user, no header) is refused with 401
/// by default: it never silently falls into one shared bucket. A server
/// that lacks what a source needs answers 500, naming the fix in debug
/// builds (and in its `error` log).
#[derive(Clone)]
pub struct KeySource(pub(crate) Source);

#[derive(Clone)]
pub(crate) enum Source {
    Ip,
    User,
    UserOrIp,
    Header(HeaderName),
    Global,
    Custom(Resolver),
}

impl KeySource {
    /// By client IP address.
    pub fn ip() -> Self {
        Self(Source::Ip)
    }

    /// By the user the router layer's resolver finds.
    pub fn user() -> Self {
        Self(Source::User)
    }

    /// By the user when the router layer's resolver finds one (a signed-in
    /// request), else by client IP address, as [`ip`](Self::ip) finds it.
    /// Each identity keeps its kind: a user's count, blocks and admin
    /// routes are the user's; an address's, the address's; a user named
    /// like an address is not that address.
    pub fn user_or_ip() -> Self {
        Self(Source::UserOrIp)
    }

    /// By the value of the header `name` (for example `x-api-key`; in gRPC,
    /// a metadata key).
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

/// The client's address as a limit `by = ip` finds it (through the trusted
/// proxies' header when the peer is one), in a request's extensions when a
/// [custom](KeySource::custom) resolver reads it: a custom key can fall
/// back on the address, or combine it with another part of the request.
///
/// ```
/// use limiter_tower::{ClientAddress, KeySource};
///
/// // By tenant header when present, else by client address.
/// let source = KeySource::custom(|parts| {
///     let tenant = parts.headers.get("x-tenant").and_then(|v| v.to_str().ok());
///     match tenant {
///         Some(tenant) => Some(format!("tenant:{tenant}")),
///         None => parts.extensions.get::<ClientAddress>().map(|a| format!("ip:{}", a.0)),
///     }
/// });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub std::net::IpAddr);

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::Ip => f.write_str("KeySource::ip()"),
            Source::User => f.write_str("KeySource::user()"),
            Source::UserOrIp => f.write_str("KeySource::user_or_ip()"),
            Source::Header(name) => write!(f, "KeySource::header({name:?})"),
            Source::Global => f.write_str("KeySource::global()"),
            Source::Custom(_) => f.write_str("KeySource::custom(..)"),
        }
    }
}

/// An entry of an identity allow or deny list
/// ([`LimiterLayer::allow_identities`](crate::LimiterLayer::allow_identities),
/// [`LimitLayer::deny_identities`](crate::LimitLayer::deny_identities)...):
/// a typed [`Identity`](limiter_core::Identity), which matches only
/// identities of its kind, or plain text, which means the limit's own kind
/// on a [`LimitLayer`](crate::LimitLayer) (its `by`), and on the
/// [`LimiterLayer`](crate::LimiterLayer) (whose lists reach limits of
/// every kind) a client address when it parses as one, else a user: an
/// API key spelled like an allowed user is not allowed.
///
/// ```
/// use limiter_tower::{Identity, Limiter, LimiterLayer, MemoryStore};
///
/// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()))
///     .allow_identities(["batch-jobs"]) // the user batch-jobs
///     .deny_identities([Identity::header("x-api-key", "leaked-key")]);
/// ```
#[derive(Debug, Clone)]
pub enum ListedIdentity {
    /// Text of the list's own kind.
    Plain(String),
    /// An identity of its kind.
    Typed(limiter_core::Identity),
}

impl From<&str> for ListedIdentity {
    fn from(text: &str) -> Self {
        Self::Plain(text.to_owned())
    }
}

impl From<String> for ListedIdentity {
    fn from(text: String) -> Self {
        Self::Plain(text)
    }
}

impl From<limiter_core::Identity> for ListedIdentity {
    fn from(identity: limiter_core::Identity) -> Self {
        Self::Typed(identity)
    }
}

impl ListedIdentity {
    /// The entry's identity as keys write it (its kind's marker, its value
    /// escaped), plain text read as `source` finds identities; `None` for
    /// text that no request of `source` can have (a global limit's, an
    /// address that does not parse).
    pub(crate) fn key_text(self, source: Option<&Source>) -> Option<String> {
        use limiter_core::Identity;
        let mut text = String::new();
        let source = match (&self, source) {
            // The router layer's, and a limit by either kind: an address
            // when it parses as one, else a user.
            (Self::Plain(plain), None | Some(Source::UserOrIp))
                if plain.parse::<std::net::IpAddr>().is_ok() =>
            {
                &Source::Ip
            }
            (_, None | Some(Source::UserOrIp)) => &Source::User,
            (_, Some(source)) => source,
        };
        match (self, source) {
            (Self::Typed(identity), _) => identity.push_key(&mut text),
            (Self::Plain(plain), Source::Ip) => {
                Identity::ip(plain.parse().ok()?).push_key(&mut text)
            }
            (Self::Plain(plain), Source::User) => {
                Identity::push_user_key(&mut text, plain.as_bytes())
            }
            (Self::Plain(plain), Source::Header(name)) => {
                Identity::push_header_key(&mut text, name.as_str(), plain.as_bytes())
            }
            (Self::Plain(plain), Source::Custom(_)) => {
                Identity::push_custom_key(&mut text, plain.as_bytes())
            }
            (Self::Plain(_), Source::Global | Source::UserOrIp) => return None,
        }
        Some(text)
    }
}
