//! Client lists: the clients and identities of an allow list (no limit
//! holds them) or a deny list (every limit refuses them).

use std::net::IpAddr;

use ipnet::IpNet;

use crate::client_ip::canonical_net;

/// Networks and identities: an allow list's requests bypass a limit
/// (neither checked nor counted, answered without RateLimit fields); a
/// deny list's are refused.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientList {
    /// Canonical, as trusted proxies are: IPv4-mapped networks are IPv4.
    nets: Vec<IpNet>,
    identities: Vec<Box<str>>,
}

impl ClientList {
    pub(crate) fn add_nets(&mut self, nets: impl IntoIterator<Item = IpNet>) {
        self.nets.extend(nets.into_iter().map(canonical_net));
    }

    /// Adds identities as keys write them ([`ListedIdentity::key_text`](crate::key::ListedIdentity)).
    pub(crate) fn add_identities(&mut self, identities: impl IntoIterator<Item = String>) {
        self.identities
            .extend(identities.into_iter().map(String::into_boxed_str));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.nets.is_empty() && self.identities.is_empty()
    }

    pub(crate) fn has_nets(&self) -> bool {
        !self.nets.is_empty()
    }

    pub(crate) fn has_identities(&self) -> bool {
        !self.identities.is_empty()
    }

    /// Whether the client at `ip` (resolved as for `by = ip`, so canonical)
    /// is on the list.
    pub(crate) fn holds_ip(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }

    pub(crate) fn holds_identity(&self, identity: &str) -> bool {
        self.identities.iter().any(|allowed| **allowed == *identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_match_mapped_addresses_as_ipv4() {
        let mut allow = ClientList::default();
        allow.add_nets(["::ffff:10.0.0.0/104".parse().unwrap()]);
        allow.add_identities(["user=partner".to_owned()]);
        assert!(allow.holds_ip("10.1.2.3".parse().unwrap()));
        assert!(!allow.holds_ip("11.0.0.1".parse().unwrap()));
        assert!(allow.holds_identity("user=partner"));
        assert!(!allow.holds_identity("user=partner2"));
        assert!(!allow.holds_identity(""));
    }
}

#[cfg(test)]
mod listed_tests {
    use limiter_core::Identity;

    use crate::ListedIdentity;
    use crate::key::Source;

    fn text(listed: impl Into<ListedIdentity>, source: &Source) -> Option<String> {
        listed.into().key_text(Some(source))
    }

    #[test]
    fn plain_entries_take_the_lists_kind_and_typed_ones_their_own() {
        let header = Source::Header(http::HeaderName::from_static("x-api-key"));
        assert_eq!(
            text("partner", &Source::User).as_deref(),
            Some("user=partner")
        );
        assert_eq!(
            text("partner", &header).as_deref(),
            Some("header.x-api-key=partner")
        );
        assert_eq!(text("127.0.0.4", &Source::Ip).as_deref(), Some("127.0.0.4"));
        // Not an address: no request by address has it.
        assert_eq!(text("partner", &Source::Ip), None);
        assert_eq!(text("partner", &Source::Global), None);
        // The router layer's: an address when it parses, else a user.
        let router = |plain: &str| ListedIdentity::from(plain).key_text(None);
        assert_eq!(router("198.51.100.9").as_deref(), Some("198.51.100.9"));
        assert_eq!(router("partner").as_deref(), Some("user=partner"));
        // A typed entry keeps its kind whatever the list's.
        let key = Identity::header("x-api-key", "partner");
        assert_eq!(
            text(key, &Source::User).as_deref(),
            Some("header.x-api-key=partner")
        );
    }
}
