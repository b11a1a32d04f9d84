//! Whose state a key names: an identity of one kind.
//!
//! A client address keeps the seeds' key form, `{prefix}:{address}`
//! (`rate_limit:203.0.113.7`, an IPv6 network escaped:
//! `rate_limit:2001%3Adb8%3A1%3A2%3A%3A/64`). Every other kind starts with
//! a marker that ends in `=`, which no address text contains:
//!
//! | kind | key of its state | example |
//! |---|---|---|
//! | client address or network | `{prefix}:{address}` | `rate_limit:203.0.113.7` |
//! | user | `{prefix}:user={user}` | `rate_limit:user=alice` |
//! | a header's value | `{prefix}:header.{name}={value}` | `rate_limit:header.x-api-key=k1` |
//! | a custom function's | `{prefix}:custom={value}` | `rate_limit:custom=tenant-7` |
//!
//! The value is escaped as [`push_identity_bytes`] escapes it (`:` among
//! others, so the marker's `=` is always the first in its part of the
//! key), and a header's name keeps only the characters a header name may
//! hold, lower-cased. So no bytes sent under one kind can name another
//! kind's state: a user id that spells an address is a user.

use std::fmt::{self, Write};
use std::net::IpAddr;

use percent_encoding::{AsciiSet, CONTROLS, percent_encode};

use crate::key::push_identity_bytes;

/// What an identity's displayed form percent-encodes: besides control
/// characters and every byte past ASCII (always encoded), `%` itself (so
/// decoding is exact), space, and what ends or splits a URL path segment
/// or a query. The displayed form is therefore a path segment the admin
/// routes read back to the same bytes.
const DISPLAYED: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// What kind of identity an [`Identity`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdentityKind {
    /// A client address, or a network of addresses (an IPv6 /64).
    Address,
    /// A user, as the application authenticates it.
    User,
    /// The value of a named request header, such as an API key.
    Header,
    /// What an application's own function returns.
    Custom,
}

/// An identity and its kind: what blocks, resets, peeks and plans name.
///
/// A client address keeps the seeds' key form, `{prefix}:{address}`; every
/// other kind starts with a marker that ends in `=`, which no address text
/// contains:
///
/// | kind | key of its state | example |
/// |---|---|---|
/// | client address or network | `{prefix}:{address}` | `rate_limit:203.0.113.7`, `rate_limit:2001%3Adb8%3A1%3A2%3A%3A/64` |
/// | user | `{prefix}:user={user}` | `rate_limit:user=alice` |
/// | a header's value | `{prefix}:header.{name}={value}` | `rate_limit:header.x-api-key=k1` |
/// | a custom function's | `{prefix}:custom={value}` | `rate_limit:custom=tenant-7` |
///
/// ```
/// use limiter_core::Identity;
///
/// let mut key = String::from("rate_limit:");
/// Identity::user("127.0.0.2").push_key(&mut key);
/// assert_eq!(key, "rate_limit:user=127.0.0.2");
///
/// let mut key = String::from("rate_limit:");
/// Identity::ip("127.0.0.2".parse().unwrap()).push_key(&mut key);
/// assert_eq!(key, "rate_limit:127.0.0.2");
///
/// let mut key = String::from("rate_limit:");
/// Identity::header("X-Api-Key", "k1").push_key(&mut key);
/// assert_eq!(key, "rate_limit:header.x-api-key=k1");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Identity(Inner);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Inner {
    Address { ip: IpAddr, prefix: Option<u8> },
    User(Box<[u8]>),
    Header { name: Box<str>, value: Box<[u8]> },
    Custom(Box<[u8]>),
}

impl Identity {
    /// A client address (an IPv4-mapped IPv6 address is its IPv4 one, as
    /// the HTTP layers find clients).
    pub fn ip(ip: IpAddr) -> Self {
        Self(Inner::Address {
            ip: ip.to_canonical(),
            prefix: None,
        })
    }

    /// The network of `ip`'s first `prefix` bits (an IPv6 /64, as the
    /// HTTP layers group IPv6 clients). A prefix of the whole address (32,
    /// 128) or more is the address itself.
    pub fn network(ip: IpAddr, prefix: u8) -> Self {
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = (prefix < bits).then_some(prefix);
        Self(Inner::Address {
            ip: truncate(ip, prefix),
            prefix,
        })
    }

    /// A user (any bytes; compared as they are: normalise them first if
    /// people may spell one name several ways).
    pub fn user(user: impl AsRef<[u8]>) -> Self {
        Self(Inner::User(user.as_ref().into()))
    }

    /// The value of the request header `name` (matched without regard to
    /// case), such as an API key.
    pub fn header(name: &str, value: impl AsRef<[u8]>) -> Self {
        Self(Inner::Header {
            name: name.to_ascii_lowercase().into_boxed_str(),
            value: value.as_ref().into(),
        })
    }

    /// What an application's own key function returned.
    pub fn custom(value: impl AsRef<[u8]>) -> Self {
        Self(Inner::Custom(value.as_ref().into()))
    }

    /// Its kind.
    pub fn kind(&self) -> IdentityKind {
        match &self.0 {
            Inner::Address { .. } => IdentityKind::Address,
            Inner::User(_) => IdentityKind::User,
            Inner::Header { .. } => IdentityKind::Header,
            Inner::Custom(_) => IdentityKind::Custom,
        }
    }

    /// The address, and the prefix when it names a network.
    pub fn address(&self) -> Option<(IpAddr, Option<u8>)> {
        match &self.0 {
            Inner::Address { ip, prefix } => Some((*ip, *prefix)),
            _ => None,
        }
    }

    /// The header's name (lower-cased) when it is a header's value.
    pub fn header_name(&self) -> Option<&str> {
        match &self.0 {
            Inner::Header { name, .. } => Some(name),
            _ => None,
        }
    }

    /// The identity's bytes: a user, a header's value, a custom value; an
    /// address's text.
    pub fn value(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.0 {
            Inner::Address { .. } => {
                let mut text = String::new();
                self.push_address_text(&mut text);
                std::borrow::Cow::Owned(text.into_bytes())
            }
            Inner::User(value) | Inner::Header { value, .. } | Inner::Custom(value) => {
                std::borrow::Cow::Borrowed(value)
            }
        }
    }

    /// The identity as operators see it: its bytes (an address's text),
    /// whole, never hashed, percent-encoded where a URL path segment
    /// needs it (`%`, space, `/`, `?`, `#` and the like, control
    /// characters, every byte past ASCII). Two identities of one kind never
    /// display alike, and an admin route
    /// given the displayed text as its path segment reads back the same
    /// identity (`2001:db8::/64` displays as `2001:db8::%2F64`).
    ///
    /// ```
    /// use limiter_core::Identity;
    ///
    /// assert_eq!(Identity::user("老钱 a/b").displayed(), "%E8%80%81%E9%92%B1%20a%2Fb");
    /// assert_eq!(Identity::user("%sha256-00").displayed(), "%25sha256-00");
    /// assert_eq!(Identity::header("x-api-key", "k-1").displayed(), "k-1");
    /// ```
    pub fn displayed(&self) -> String {
        percent_encode(&self.value(), DISPLAYED).to_string()
    }

    /// The identity as one line naming its kind, for tallies keyed by
    /// text (top offenders): `ip {displayed}`, `user {displayed}`,
    /// `custom {displayed}`, `header {name} {displayed}`. Read back with
    /// [`read_labelled`](Self::read_labelled).
    pub fn labelled(&self) -> String {
        let displayed = self.displayed();
        match &self.0 {
            Inner::Address { .. } => format!("ip {displayed}"),
            Inner::User(_) => format!("user {displayed}"),
            Inner::Custom(_) => format!("custom {displayed}"),
            Inner::Header { name, .. } => {
                let name = percent_encode(name.as_bytes(), DISPLAYED);
                format!("header {name} {displayed}")
            }
        }
    }

    /// The kind, the header's name (for a header's value) and the displayed
    /// identity of a [`labelled`](Self::labelled) text; `None` for any
    /// other text.
    ///
    /// ```
    /// use limiter_core::{Identity, IdentityKind};
    ///
    /// let labelled = Identity::header("X-Api-Key", "k 1").labelled();
    /// assert_eq!(
    ///     Identity::read_labelled(&labelled),
    ///     Some((IdentityKind::Header, Some("x-api-key"), "k%201"))
    /// );
    /// ```
    pub fn read_labelled(text: &str) -> Option<(IdentityKind, Option<&str>, &str)> {
        let (kind, rest) = text.split_once(' ')?;
        match kind {
            "ip" => Some((IdentityKind::Address, None, rest)),
            "user" => Some((IdentityKind::User, None, rest)),
            "custom" => Some((IdentityKind::Custom, None, rest)),
            "header" => {
                let (name, displayed) = rest.split_once(' ')?;
                Some((IdentityKind::Header, Some(name), displayed))
            }
            _ => None,
        }
    }

    /// Appends the identity's part of a key, its kind's marker and its
    /// escaped value (see [`Identity`]'s kinds table).
    pub fn push_key(&self, key: &mut String) {
        match &self.0 {
            Inner::Address { .. } => {
                let mut text = String::with_capacity(48);
                self.push_address_text(&mut text);
                // Digits, dots and `/` stay; an IPv6 address's `:` is escaped.
                push_identity_bytes(key, text.as_bytes());
            }
            Inner::User(user) => Self::push_user_key(key, user),
            Inner::Header { name, value } => Self::push_header_key(key, name, value),
            Inner::Custom(value) => Self::push_custom_key(key, value),
        }
    }

    /// Appends a user's part of a key (`user={user}`), as
    /// [`push_key`](Self::push_key) does, without building an identity.
    pub fn push_user_key(key: &mut String, user: &[u8]) {
        key.push_str("user=");
        push_identity_bytes(key, user);
    }

    /// Appends a header value's part of a key (`header.{name}={value}`).
    pub fn push_header_key(key: &mut String, name: &str, value: &[u8]) {
        // A header name's characters (RFC 9110 `tchar`), which hold no `=`
        // nor `:`; anything else is percent-encoded.
        let tchar = |byte: u8| byte.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&byte);
        key.push_str("header.");
        // As `http` gives them: lowercase already, copied whole.
        if name.bytes().all(|b| tchar(b) && !b.is_ascii_uppercase()) {
            key.push_str(name);
        } else {
            for byte in name.bytes() {
                if tchar(byte) {
                    key.push(char::from(byte.to_ascii_lowercase()));
                } else {
                    let _ = write!(key, "%{byte:02X}");
                }
            }
        }
        key.push('=');
        push_identity_bytes(key, value);
    }

    /// Appends a custom value's part of a key (`custom={value}`).
    pub fn push_custom_key(key: &mut String, value: &[u8]) {
        key.push_str("custom=");
        push_identity_bytes(key, value);
    }

    fn push_address_text(&self, text: &mut String) {
        if let Inner::Address { ip, prefix } = &self.0 {
            let _ = match prefix {
                Some(prefix) => write!(text, "{ip}/{prefix}"),
                None => write!(text, "{ip}"),
            };
        }
    }
}

/// `ip` with the bits past `prefix` cleared.
fn truncate(ip: IpAddr, prefix: Option<u8>) -> IpAddr {
    let Some(prefix) = prefix else { return ip };
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

impl From<IpAddr> for Identity {
    fn from(ip: IpAddr) -> Self {
        Self::ip(ip)
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut key = String::new();
        self.push_key(&mut key);
        write!(f, "Identity({key})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(identity: &Identity) -> String {
        let mut key = String::new();
        identity.push_key(&mut key);
        key
    }

    #[test]
    fn each_kind_has_its_own_key() {
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(key(&Identity::ip(ip)), "127.0.0.2");
        assert_eq!(key(&Identity::user("127.0.0.2")), "user=127.0.0.2");
        assert_eq!(
            key(&Identity::header("x-api-key", "127.0.0.2")),
            "header.x-api-key=127.0.0.2"
        );
        assert_eq!(key(&Identity::custom("127.0.0.2")), "custom=127.0.0.2");
    }

    #[test]
    fn displayed_identities_are_whole_distinct_and_read_back() {
        let long = "k".repeat(300);
        let identities = [
            Identity::user(&long),
            Identity::user("%sha256-abc"),
            Identity::user(b"caf\xe9"),
            Identity::user("caf%E9"),
            Identity::user("a b/c?d#e"),
            Identity::custom("a b/c?d#e"),
            Identity::header("x-api-key", "a b/c?d#e"),
            Identity::header("x-other", "a b/c?d#e"),
            Identity::network("2001:db8::1".parse().unwrap(), 64),
            Identity::ip("203.0.113.7".parse().unwrap()),
        ];
        // Never hashed: the whole identity, and no two alike.
        assert_eq!(identities[0].displayed(), long);
        let labelled: std::collections::HashSet<String> =
            identities.iter().map(Identity::labelled).collect();
        assert_eq!(labelled.len(), identities.len());
        for identity in &identities {
            let labelled = identity.labelled();
            let (kind, header, displayed) = Identity::read_labelled(&labelled).unwrap();
            assert_eq!(kind, identity.kind());
            assert_eq!(header, identity.header_name());
            assert_eq!(displayed, identity.displayed());
            // Percent-decoding the displayed text gives the bytes back.
            let bytes: Vec<u8> = percent_encoding::percent_decode_str(displayed).collect();
            assert_eq!(bytes, &*identity.value(), "{labelled}");
        }
        assert_eq!(identities[8].displayed(), "2001:db8::%2F64");
        assert_eq!(Identity::read_labelled("nobody x"), None);
    }

    #[test]
    fn networks_are_truncated_and_escaped() {
        let ip: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        assert_eq!(
            key(&Identity::network(ip, 64)),
            "2001%3Adb8%3A1%3A2%3A%3A/64"
        );
        assert_eq!(key(&Identity::network(ip, 128)), key(&Identity::ip(ip)));
        let v4: IpAddr = "203.0.113.77".parse().unwrap();
        assert_eq!(key(&Identity::network(v4, 24)), "203.0.113.0/24");
        assert_eq!(key(&Identity::network(v4, 0)), "0.0.0.0/0");
    }

    #[test]
    fn no_value_of_one_kind_spells_another_kinds_key() {
        // A user whose id spells another kind's whole key part stays a user.
        for spelled in [
            "127.0.0.2",
            "2001%3Adb8%3A1%3A2%3A%3A/64",
            "header.x-api-key=k",
            "custom=x",
            "user=x",
        ] {
            let as_user = key(&Identity::user(spelled));
            assert!(as_user.starts_with("user="), "{as_user}");
            assert_ne!(as_user, key(&Identity::custom(spelled)));
            assert_ne!(as_user, key(&Identity::header("user", spelled)));
        }
        // A header name cannot carry a marker's `=` or a separator.
        assert_eq!(key(&Identity::header("a=b:c", "v")), "header.a%3Db%3Ac=v");
        // An address's text never holds `=`.
        assert!(!key(&Identity::ip("::1".parse().unwrap())).contains('='));
        // An IPv4-mapped address is the IPv4 one.
        assert_eq!(
            key(&Identity::ip("::ffff:127.0.0.2".parse().unwrap())),
            "127.0.0.2"
        );
    }
}
