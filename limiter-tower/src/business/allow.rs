//! Allow lists: clients and identities that no limit holds.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::client_ip::canonical_net;

/// Networks and identities whose requests bypass a limit: neither checked
/// nor counted, and answered without RateLimit fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct AllowList {
    /// Canonical, as trusted proxies are: IPv4-mapped networks are IPv4.
    nets: Vec<IpNet>,
    identities: Vec<Box<str>>,
}

impl AllowList {
    pub(crate) fn add_nets(&mut self, nets: impl IntoIterator<Item = IpNet>) {
        self.nets.extend(nets.into_iter().map(canonical_net));
    }

    pub(crate) fn add_identities<I: Into<String>>(
        &mut self,
        identities: impl IntoIterator<Item = I>,
    ) {
        self.identities
            .extend(identities.into_iter().map(|i| i.into().into_boxed_str()));
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
    /// is allowed.
    pub(crate) fn allows_ip(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }

    pub(crate) fn allows_identity(&self, identity: &str) -> bool {
        self.identities.iter().any(|allowed| **allowed == *identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_match_mapped_addresses_as_ipv4() {
        let mut allow = AllowList::default();
        allow.add_nets(["::ffff:10.0.0.0/104".parse().unwrap()]);
        allow.add_identities(["partner"]);
        assert!(allow.allows_ip("10.1.2.3".parse().unwrap()));
        assert!(!allow.allows_ip("11.0.0.1".parse().unwrap()));
        assert!(allow.allows_identity("partner"));
        assert!(!allow.allows_identity("partner2"));
        assert!(!allow.allows_identity(""));
    }
}
