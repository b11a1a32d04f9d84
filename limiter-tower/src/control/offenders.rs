//! The identities each limit denied most lately, across the instances
//! sharing the store: this instance's counts, live, merged with those the
//! others published.

use std::fmt;
use std::time::Duration;

use limiter_core::{DeniedReport, Error, Identity, IdentityKind};
use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::Control;
use limiter_core::decide::board;

/// A limit's most denied identities across the instances that share the
/// store ([`Control::top_denied`]), and how fresh each instance's counts
/// are.
///
/// Serialized as the admin router answers it: `{"offenders": [...],
/// "instances": [{"instance": "web-1-4242", "age_ms": 0}, ...]}`, with
/// `"unread"` saying why other instances' counts could not be read, when
/// they could not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct TopOffenders {
    /// The most denied identities, highest count first.
    pub offenders: Vec<Offender>,
    /// The instances whose counts are in, this one first (age 0: read
    /// live), each with its counts' age.
    pub instances: Vec<Reporting>,
    /// Why other instances' counts are not in, when they are not: the
    /// store failed, or an instance published a format this version does
    /// not read. `None`: every instance that published within the last
    /// three publishing periods is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

/// An instance whose counts a [`TopOffenders`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reporting {
    /// Its name ([`Control::instance_id`]).
    pub instance: String,
    /// How old its counts are: 0 for this instance's, read live; else the
    /// time since it published them, by the store's clock.
    pub age: Duration,
}

impl Serialize for Reporting {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Reporting", 2)?;
        out.serialize_field("instance", &self.instance)?;
        let age_ms = u64::try_from(self.age.as_millis()).unwrap_or(u64::MAX);
        out.serialize_field("age_ms", &age_ms)?;
        out.end()
    }
}

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

pub(super) async fn top_denied(
    control: &Control,
    limit: &str,
    n: usize,
) -> Result<TopOffenders, UnknownLimit> {
    let (part, found) = control
        .parts()
        .flat_map(|part| part.limits.iter().map(move |named| (part, named)))
        .find(|(_, named)| named.limit.name() == limit)
        .ok_or_else(|| UnknownLimit(limit.to_owned()))?;
    // The limit's own router layer's, when it has one, as it records.
    let context = found.limit.context.as_ref().unwrap_or(&part.context);
    let offenders = &context.shared.offenders;
    let instance = offenders.instance();
    let mut reports = vec![offenders.report(limit)];
    let mut instances = vec![Reporting {
        instance: instance.to_string(),
        age: Duration::ZERO,
    }];
    let mut unread = None;
    let published = match context.shared.store.capabilities().as_shared_control() {
        Some(shared) => {
            shared
                .reports(&board(&context.shared.key_start, limit))
                .await
        }
        None => Err(Error::Unsupported("reports")),
    };
    match published {
        Ok(published) => {
            for report in published.into_iter().filter(|r| *r.instance != *instance) {
                match DeniedReport::from_text(&report.body) {
                    Some(read) => {
                        reports.push(read);
                        instances.push(Reporting {
                            instance: report.instance,
                            age: report.age,
                        });
                    }
                    None => {
                        unread = Some(format!(
                            "instance {:?} published its counts in a format this version \
                             does not read",
                            report.instance
                        ))
                    }
                }
            }
        }
        // A store no other instance shares: this instance's counts are all.
        Err(Error::Unsupported(_)) => {}
        Err(error) => unread = Some(format!("the store did not answer: {error}")),
    }
    instances[1..].sort_by(|a, b| a.instance.cmp(&b.instance));
    let offenders = DeniedReport::merge(&reports, n)
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
        .collect();
    Ok(TopOffenders {
        offenders,
        instances,
        unread,
    })
}

pub(super) fn instance(control: &Control) -> &str {
    &control.instance
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
        use limiter_core::decide::{default_instance, sanitized};
        assert_eq!(&*sanitized("web 1\né"), "web_1__");
        assert!(default_instance().ends_with(&format!("-{}", std::process::id())));
    }
}
