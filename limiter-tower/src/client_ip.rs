//! Who the client is, by address: the peer, or behind trusted proxies the
//! rightmost address that is not a trusted proxy in the one header those
//! proxies write.

mod hops;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, Ipv4Addr};

use http::header::FORWARDED;
use http::{HeaderMap, HeaderName, HeaderValue};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// The IPv6 prefix length clients are grouped by unless set: one /64 is what
/// one subscriber usually gets, so one client.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Where the client's address is read when the peer is a trusted proxy: the
/// one header the deployment's proxies write. No other header is ever read,
/// since a proxy that writes one passes a client's forgery of the others
/// through untouched. Set with
/// [`LimiterLayer::client_ip_source`](crate::LimiterLayer::client_ip_source).
///
/// | source | reads | written by, for example |
/// |---|---|---|
/// | [`Peer`](Self::Peer) | nothing: the connection's peer address | (no proxy in front) |
/// | [`RightmostXForwardedFor`](Self::RightmostXForwardedFor) (default) | `X-Forwarded-For` | nginx (`$proxy_add_x_forwarded_for`), HAProxy (`option forwardfor`), AWS ALB |
/// | [`RightmostForwarded`](Self::RightmostForwarded) | the `for=` parameters of `Forwarded` (RFC 7239) | HAProxy (`option forwarded`), a proxy set to write RFC 7239 |
/// | [`XRealIp`](Self::XRealIp) | `X-Real-IP` | nginx (`proxy_set_header X-Real-IP $remote_addr`) |
///
/// Headers are believed only from a [trusted proxy](crate::LimiterLayer::trusted_proxies):
/// without any, or when the peer is not one, the client is the peer, whatever
/// the source. Behind trusted proxies the client is the rightmost address in
/// the header that is not a trusted proxy (each proxy appends the address it
/// received the request from, so everything left of the first untrusted
/// address from the right was written by the client). In detail:
///
/// - Several fields of the header are one comma-separated list, in order
///   (each field is parsed on its own: a quote left open in one cannot
///   swallow the next). Empty list elements are skipped.
/// - An entry that is not an address (`unknown`, an obfuscated identifier such
///   as `_hidden`, an address with a zone id such as `fe80::1%eth0`, bytes
///   that are not text, a malformed `Forwarded` element, one without `for=`)
///   ends the walk at the last address known good: the trusted proxy to its
///   right, or the peer. Garbage never picks the key.
/// - Entries may carry a port (`192.0.2.7:4711`, `[2001:db8::7]:4711`, in
///   `Forwarded` an obfuscated `_port` too); IPv6 may be bracketed.
/// - An IPv4-mapped IPv6 address (`::ffff:192.0.2.7`) is the IPv4 address,
///   in the header and as the peer alike.
/// - `X-Real-IP` is read by the same rule. A proxy that sets it sends one
///   field; one that adds a field puts its own after any the client sent.
///   Either way the rightmost value is the proxy's, so several fields are
///   no way around it.
///
/// ```
/// use limiter_tower::{ClientIpSource, Limiter, LimiterLayer, MemoryStore};
///
/// // Behind a load balancer in 10.0.0.0/8 that writes `Forwarded`:
/// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()))
///     .trusted_proxies(["10.0.0.0/8".parse()?])
///     .client_ip_source(ClientIpSource::RightmostForwarded);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientIpSource {
    /// The connection's peer address; no header is read.
    Peer,
    /// The rightmost address in `X-Forwarded-For` that is not a trusted proxy.
    #[default]
    RightmostXForwardedFor,
    /// The rightmost `for=` address in `Forwarded` (RFC 7239) that is not a
    /// trusted proxy.
    RightmostForwarded,
    /// The address in `X-Real-IP`, set by the trusted proxy in front (the
    /// rightmost one that is not a trusted proxy, when there are several).
    XRealIp,
}

/// How the client address is found.
#[derive(Debug, Clone)]
pub(crate) struct ClientIp {
    /// Canonical: see [`canonical_net`].
    trusted_proxies: Vec<IpNet>,
    pub(crate) source: ClientIpSource,
    pub(crate) ipv6_prefix: u8,
}

impl Default for ClientIp {
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            source: ClientIpSource::default(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }
}

/// `net` as it is matched, with its host bits cleared. A network written
/// inside `::ffff:0:0/96` is the IPv4 network it maps (`::ffff:10.0.0.0/104`
/// is `10.0.0.0/8`), since mapped addresses are matched as IPv4. Any other
/// IPv6 network matches IPv6 addresses only: `::/0` trusts no IPv4 client,
/// mapped or not; list `0.0.0.0/0` for that.
pub(crate) fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => {
                Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(net, |v4| IpNet::V4(v4.trunc()))
            }
            None => IpNet::V6(v6.trunc()),
        },
        _ => net.trunc(),
    }
}

impl ClientIp {
    pub(crate) fn set_trusted_proxies(&mut self, proxies: impl IntoIterator<Item = IpNet>) {
        self.trusted_proxies = proxies.into_iter().map(canonical_net).collect();
    }

    /// The client's address: the peer, or when the peer is a trusted proxy
    /// the rightmost untrusted address in the source's header (see
    /// [`ClientIpSource`]).
    #[inline]
    pub(crate) fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        // Without trusted proxies (the default), the peer, decided inline.
        if self.trusted_proxies.is_empty() {
            return peer;
        }
        self.resolve_behind_proxies(peer, headers)
    }

    /// [`resolve`](Self::resolve) when some proxies are trusted.
    #[inline(never)]
    fn resolve_behind_proxies(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.is_trusted(peer) {
            return peer;
        }
        let fields = |name| headers.get_all(name).into_iter().map(HeaderValue::as_bytes);
        let client = match self.source {
            ClientIpSource::Peer => None,
            ClientIpSource::RightmostXForwardedFor => {
                self.rightmost_untrusted(fields(X_FORWARDED_FOR).flat_map(hops::address_list))
            }
            ClientIpSource::XRealIp => {
                self.rightmost_untrusted(fields(X_REAL_IP).flat_map(hops::address_list))
            }
            ClientIpSource::RightmostForwarded => {
                self.rightmost_untrusted(fields(FORWARDED).flat_map(hops::forwarded))
            }
        };
        client.unwrap_or(peer)
    }

    /// The client named by a list of hops (`None` for one that is not an
    /// address), or `None` for the next hop to the right: the peer.
    ///
    /// Walking from the right, the client is the first address that is not a
    /// trusted proxy, and a hop that is not an address stops the walk at the
    /// hop to its right. Read left to right instead, with no buffer however
    /// long the header, that walk is this fold, whose state is the answer
    /// were the list to end there.
    fn rightmost_untrusted(&self, hops: impl Iterator<Item = Option<IpAddr>>) -> Option<IpAddr> {
        hops.fold(None, |client, hop| match hop {
            None => None,
            Some(ip) if !self.is_trusted(ip) => Some(ip),
            // Trusted: the client stays what was found left of it, if anything.
            Some(ip) => client.or(Some(ip)),
        })
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(&ip))
    }

    /// The identity of an address: IPv4 as is, IPv6 as its network of
    /// `ipv6_prefix` bits, so one subscriber cannot rotate through its /64.
    #[cfg(test)]
    fn identity(&self, ip: IpAddr) -> String {
        let mut identity = String::with_capacity(48);
        self.push_identity(&mut identity, ip);
        identity
    }

    /// The identity of the client `ip`: an IPv6 address as the network of
    /// its first `ipv6_prefix` bits, as keys group it.
    pub(crate) fn identity_of(&self, ip: IpAddr) -> limiter_core::Identity {
        match ip.to_canonical() {
            v4 @ IpAddr::V4(_) => limiter_core::Identity::ip(v4),
            v6 => limiter_core::Identity::network(v6, self.ipv6_prefix),
        }
    }

    /// Appends the escaped identity of `ip` to a key.
    pub(crate) fn push_identity(&self, key: &mut String, ip: IpAddr) {
        use std::fmt::Write;
        match ip {
            // Digits and dots: nothing to escape.
            IpAddr::V4(v4) => push_ipv4(key, v4),
            IpAddr::V6(v6) => {
                let mut text = String::with_capacity(48);
                let _ = match Ipv6Net::new(v6, self.ipv6_prefix) {
                    Ok(net) if self.ipv6_prefix < 128 => write!(text, "{}", net.trunc()),
                    _ => write!(text, "{v6}"),
                };
                limiter_core::push_identity(key, &text);
            }
        }
    }
}

/// Appends an IPv4 address in dotted decimal, its identity: digits and dots
/// need no escaping. (This runs on every request limited by IP: pushing
/// ASCII characters one by one costs a third of formatting the address or
/// validating a buffer as UTF-8.)
#[inline(always)]
pub(crate) fn push_ipv4(key: &mut String, ip: Ipv4Addr) {
    let digit = |d: u8| char::from(b'0' + d);
    for (i, octet) in ip.octets().into_iter().enumerate() {
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
