//! Who the client is, by address: the peer, or behind trusted proxies the
//! rightmost forwarded address that is not a trusted proxy.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use http::HeaderMap;
use http::header::FORWARDED;

/// The IPv6 prefix length clients are grouped by unless set: one /64 is what
/// one subscriber usually gets, so one client.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// An IP network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`, or a single
/// address), naming proxies whose forwarding headers are believed.
///
/// ```
/// use limiter_tower::IpNet;
///
/// let net: IpNet = "10.0.0.0/8".parse()?;
/// assert!(net.contains("10.1.2.3".parse()?));
/// assert!(!net.contains("11.0.0.1".parse()?));
/// assert!("10.0.0.0/33".parse::<IpNet>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// Why a text is not a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpNetError(String);

impl fmt::Display for IpNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not an IP network in CIDR notation: {:?}", self.0)
    }
}

impl std::error::Error for IpNetError {}

impl FromStr for IpNet {
    type Err = IpNetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let error = || IpNetError(s.to_owned());
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| error())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(error)?,
            None => max,
        };
        Ok(Self {
            addr: mask(addr.to_canonical(), prefix),
            prefix,
        })
    }
}

impl IpNet {
    /// Whether `ip` lies in this network (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

/// `ip` with all but the first `prefix` bits cleared.
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4) & u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(bits.into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    }
}

/// How the client address is found.
#[derive(Debug, Clone)]
pub(crate) struct ClientIp {
    pub(crate) trusted_proxies: Vec<IpNet>,
    pub(crate) ipv6_prefix: u8,
}

impl Default for ClientIp {
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }
}

impl ClientIp {
    /// The client's address. Without trusted proxies, or from an untrusted
    /// peer, the peer itself; otherwise the chain in `Forwarded` (or, when
    /// that is absent, `X-Forwarded-For`) is walked from the right, past
    /// trusted proxies. An entry that does not parse ends the walk at the
    /// last address known good, so garbage can never pick the key.
    pub(crate) fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.is_trusted(client) {
            return client;
        }
        let forwarded = forwarded_chain(headers);
        for hop in forwarded.iter().rev() {
            match hop {
                Some(ip) => {
                    client = ip.to_canonical();
                    if !self.is_trusted(client) {
                        return client;
                    }
                }
                None => return client,
            }
        }
        client
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(ip))
    }

    /// The identity of an address: IPv4 as is, IPv6 as its network of
    /// `ipv6_prefix` bits, so one subscriber cannot rotate through its /64.
    #[cfg(test)]
    fn identity(&self, ip: IpAddr) -> String {
        let mut identity = String::with_capacity(48);
        self.push_identity(&mut identity, ip);
        identity
    }

    /// Appends the escaped identity of `ip` to a key.
    pub(crate) fn push_identity(&self, key: &mut String, ip: IpAddr) {
        use std::fmt::Write;
        match ip {
            // Digits and dots: nothing to escape.
            IpAddr::V4(v4) => {
                let digit = |d: u8| char::from(b'0' + d);
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        key.push('.');
                    }
                    if octet >= 100 {
                        key.push(digit(octet / 100));
                    }
                    if octet >= 10 {
                        key.push(digit(octet / 10 % 10));
                    }
                    key.push(digit(octet % 10));
                }
            }
            IpAddr::V6(_) => {
                let mut text = String::with_capacity(48);
                let _ = if self.ipv6_prefix >= 128 {
                    write!(text, "{ip}")
                } else {
                    write!(text, "{}/{}", mask(ip, self.ipv6_prefix), self.ipv6_prefix)
                };
                limiter_core::push_identity(key, &text);
            }
        }
    }
}

/// The addresses of a forwarding chain, oldest first; `None` for an entry
/// that is not an address (`unknown`, an obfuscated name, garbage).
fn forwarded_chain(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let forwarded: Vec<_> = headers.get_all(FORWARDED).iter().collect();
    if !forwarded.is_empty() {
        return forwarded
            .iter()
            .flat_map(|value| match value.to_str() {
                Ok(text) => text.split(',').map(forwarded_for).collect(),
                Err(_) => vec![None],
            })
            .collect();
    }
    headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|value| match value.to_str() {
            Ok(text) => text.split(',').map(parse_addr).collect(),
            Err(_) => vec![None],
        })
        .collect()
}

/// The `for=` parameter of one `Forwarded` element (RFC 7239).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then_some(value.trim())
    })?;
    let value = value.trim_matches('"');
    match value.strip_prefix('[') {
        // `[2001:db8::1]` or `[2001:db8::1]:4711`
        Some(rest) => rest.split_once(']')?.0.parse().ok(),
        None => parse_addr(value),
    }
}

/// An address, with or without a port.
fn parse_addr(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn behind(proxies: &[&str]) -> ClientIp {
        ClientIp {
            trusted_proxies: proxies.iter().map(|p| p.parse().unwrap()).collect(),
            ..ClientIp::default()
        }
    }

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn ipv4_identities_are_the_dotted_decimal_text() {
        let client = ClientIp::default();
        for octet in 0..=255u8 {
            for v4 in [
                std::net::Ipv4Addr::new(octet, 0, 9, 255),
                std::net::Ipv4Addr::new(10, octet, 100, octet),
            ] {
                assert_eq!(client.identity(IpAddr::V4(v4)), v4.to_string());
            }
        }
    }

    #[test]
    fn an_untrusted_peer_cannot_spoof_its_address() {
        let spoofed = headers(&[("x-forwarded-for", b"1.2.3.4")]);
        assert_eq!(
            behind(&[]).resolve(ip("203.0.113.7"), &spoofed),
            ip("203.0.113.7")
        );
        assert_eq!(
            behind(&["10.0.0.0/8"]).resolve(ip("203.0.113.7"), &spoofed),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn the_rightmost_untrusted_forwarded_address_is_the_client() {
        let proxies = behind(&["10.0.0.0/8"]);
        // The client prepended a lie; the trusted proxy appended the truth.
        let chain = headers(&[("x-forwarded-for", b"6.6.6.6, 198.51.100.9, 10.0.0.2")]);
        assert_eq!(proxies.resolve(ip("10.0.0.1"), &chain), ip("198.51.100.9"));
        let split = headers(&[
            ("x-forwarded-for", b"6.6.6.6"),
            ("x-forwarded-for", b"198.51.100.9:443"),
        ]);
        assert_eq!(proxies.resolve(ip("10.0.0.1"), &split), ip("198.51.100.9"));
    }

    #[test]
    fn forwarded_wins_over_x_forwarded_for() {
        let proxies = behind(&["10.0.0.0/8"]);
        let both = headers(&[
            (
                "forwarded",
                b"for=192.0.2.60;proto=http, for=\"[2001:db8:cafe::17]:4711\"",
            ),
            ("x-forwarded-for", b"1.1.1.1"),
        ]);
        assert_eq!(
            proxies.resolve(ip("10.0.0.1"), &both),
            ip("2001:db8:cafe::17")
        );
    }

    #[test]
    fn garbage_stops_the_walk_at_the_last_good_address() {
        let proxies = behind(&["10.0.0.0/8"]);
        for garbage in [&b"not-an-ip"[..], b"for=unknown", b"\xff\xfe", b",,,", b""] {
            let h = headers(&[("x-forwarded-for", garbage)]);
            assert_eq!(proxies.resolve(ip("10.0.0.1"), &h), ip("10.0.0.1"));
            let h = headers(&[("forwarded", garbage)]);
            assert_eq!(proxies.resolve(ip("10.0.0.1"), &h), ip("10.0.0.1"));
        }
        let h = headers(&[("x-forwarded-for", b"198.51.100.9, junk, 10.0.0.3")]);
        assert_eq!(proxies.resolve(ip("10.0.0.1"), &h), ip("10.0.0.3"));
    }

    #[test]
    fn ipv6_clients_are_grouped_by_prefix() {
        let client = ClientIp::default();
        // As they stand in a key: the colons escaped.
        let network = "2001%3Adb8%3A1%3A2%3A%3A/64";
        assert_eq!(client.identity(ip("2001:db8:1:2:aaaa::1")), network);
        assert_eq!(client.identity(ip("2001:db8:1:2:bbbb::9")), network);
        assert_eq!(client.identity(ip("203.0.113.7")), "203.0.113.7");
        let wide = ClientIp {
            ipv6_prefix: 48,
            ..ClientIp::default()
        };
        assert_eq!(
            wide.identity(ip("2001:db8:1:2::1")),
            "2001%3Adb8%3A1%3A%3A/48"
        );
        // IPv4-mapped IPv6 peers are IPv4 clients.
        assert_eq!(
            behind(&[]).resolve(ip("::ffff:203.0.113.7"), &HeaderMap::new()),
            ip("203.0.113.7")
        );
    }
}
