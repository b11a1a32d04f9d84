//! The identities each limit denied most lately, on this instance.

use std::fmt;
use std::sync::{Arc, OnceLock};

use limiter_core::{Identity, IdentityKind};
use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::Control;

/// One of the identities a limit denied most lately
/// ([`Control::top_denied`]), as this instance counted them.
///
/// Serialized as the admin router answers it, its kind named as the admin
/// routes name it (`ip`, `user`, `key` for the API key header's value,
/// `custom`; another header's value is `header`, with a field `header`
/// naming it): `{"kind": "user", "identity": "mallory", "denied": 120,
/// "error": 0}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offender {
    /// The identity's kind.
    pub kind: IdentityKind,
    /// For a header's value, the header's name (lower-cased).
    pub header: Option<String>,
    /// The identity as the admin routes take it, whole and never hashed
    /// ([`Identity::displayed`]): an address's text, a user, a header's or
    /// a custom function's value, percent-encoded where a URL path needs it
    /// (`%`, `/`, space, bytes past ASCII...). Given as it is to an admin
    /// route (`PUT /blocks/{kind}/{identity}`), it names this identity; two
    /// identities of one kind never display alike.
    pub identity: String,
    /// Its denials counted: at least its true count.
    pub denied: u64,
    /// How much `denied` may overestimate: the true count is in
    /// `[denied - error, denied]`.
    pub error: u64,
    /// Whether the header is the admin router's API key header.
    api_key: bool,
}

impl Serialize for Offender {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let other_header = self.header.as_deref().filter(|_| !self.api_key);
        let fields = if other_header.is_some() { 5 } else { 4 };
        let mut out = serializer.serialize_struct("Offender", fields)?;
        let kind = match self.kind {
            IdentityKind::Address => "ip",
            IdentityKind::User => "user",
            IdentityKind::Header if self.api_key => "key",
            IdentityKind::Header => "header",
            IdentityKind::Custom => "custom",
        };
        out.serialize_field("kind", kind)?;
        if let Some(header) = other_header {
            out.serialize_field("header", header)?;
        }
        out.serialize_field("identity", &self.identity)?;
        out.serialize_field("denied", &self.denied)?;
        out.serialize_field("error", &self.error)?;
        out.end()
    }
}

/// No limit of a [`Control`] (nor of those it merged) has this name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLimit(pub String);

impl fmt::Display for UnknownLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no limit is named {:?}", self.0)
    }
}

impl std::error::Error for UnknownLimit {}

pub(super) fn top_denied(
    control: &Control,
    limit: &str,
    n: usize,
) -> Result<Vec<Offender>, UnknownLimit> {
    let (part, found) = control
        .parts()
        .flat_map(|part| part.limits.iter().map(move |named| (part, named)))
        .find(|(_, named)| &*named.limit.name == limit)
        .ok_or_else(|| UnknownLimit(limit.to_owned()))?;
    // The limit's own router layer's, when it has one, as it records.
    let context = found.limit.context.as_ref().unwrap_or(&part.context);
    let denied = context.offenders.top(limit, n);
    Ok(denied
        .into_iter()
        .filter_map(|denied| {
            let (kind, header, identity) = Identity::read_labelled(&denied.identity)?;
            Some(Offender {
                kind,
                header: header.map(str::to_owned),
                identity: identity.to_owned(),
                denied: denied.count,
                error: denied.error,
                api_key: header == Some(&*control.api_key_header),
            })
        })
        .collect())
}

pub(super) fn instance(control: &Control) -> &str {
    &control.instance
}

/// This process's default name: the host's name and the process id.
pub(super) fn default_instance() -> Arc<str> {
    static INSTANCE: OnceLock<Arc<str>> = OnceLock::new();
    let instance = INSTANCE.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| std::env::var("COMPUTERNAME").ok())
            .map(|host| host.trim().to_owned())
            .filter(|host| !host.is_empty())
            .unwrap_or_else(|| "localhost".to_owned());
        sanitized(&format!("{host}-{}", std::process::id()))
    });
    Arc::clone(instance)
}

/// `id` with every character but visible ASCII replaced by `_`: a header's
/// value.
pub(super) fn sanitized(id: &str) -> Arc<str> {
    id.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offenders_are_named_as_the_admin_routes_name_them() {
        let offender = |kind, header: Option<&str>, api_key| Offender {
            kind,
            header: header.map(str::to_owned),
            identity: "v".to_owned(),
            denied: 3,
            error: 1,
            api_key,
        };
        let json = |o: &Offender| serde_json::to_string(o).unwrap();
        assert_eq!(
            json(&offender(IdentityKind::Address, None, false)),
            r#"{"kind":"ip","identity":"v","denied":3,"error":1}"#
        );
        assert_eq!(
            json(&offender(IdentityKind::User, None, false)),
            r#"{"kind":"user","identity":"v","denied":3,"error":1}"#
        );
        assert_eq!(
            json(&offender(IdentityKind::Header, Some("x-api-key"), true)),
            r#"{"kind":"key","identity":"v","denied":3,"error":1}"#
        );
        assert_eq!(
            json(&offender(IdentityKind::Header, Some("x-tenant"), false)),
            r#"{"kind":"header","header":"x-tenant","identity":"v","denied":3,"error":1}"#
        );
        assert_eq!(
            json(&offender(IdentityKind::Custom, None, false)),
            r#"{"kind":"custom","identity":"v","denied":3,"error":1}"#
        );
    }

    #[test]
    fn instance_names_are_header_values() {
        assert_eq!(&*sanitized("web 1\né"), "web_1__");
        assert!(default_instance().ends_with(&format!("-{}", std::process::id())));
    }
}
