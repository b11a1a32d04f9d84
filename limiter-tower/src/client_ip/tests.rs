use http::HeaderValue;

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn behind(proxies: &[&str], source: ClientIpSource) -> ClientIp {
    let mut client_ip = ClientIp {
        source,
        ..ClientIp::default()
    };
    client_ip.set_trusted_proxies(proxies.iter().map(|p| p.parse().unwrap()));
    client_ip
}

fn xff_behind(proxies: &[&str]) -> ClientIp {
    behind(proxies, ClientIpSource::RightmostXForwardedFor)
}

fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
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
    let spoofed = headers(&[
        ("x-forwarded-for", b"1.2.3.4"),
        ("forwarded", b"for=1.2.3.4"),
        ("x-real-ip", b"1.2.3.4"),
    ]);
    for source in [
        ClientIpSource::RightmostXForwardedFor,
        ClientIpSource::RightmostForwarded,
        ClientIpSource::XRealIp,
    ] {
        assert_eq!(
            behind(&[], source).resolve(ip("203.0.113.7"), &spoofed),
            ip("203.0.113.7")
        );
        assert_eq!(
            behind(&["10.0.0.0/8"], source).resolve(ip("203.0.113.7"), &spoofed),
            ip("203.0.113.7")
        );
    }
}

#[test]
fn the_rightmost_untrusted_forwarded_address_is_the_client() {
    let proxies = xff_behind(&["10.0.0.0/8"]);
    // The client prepended a lie; the trusted proxies appended the truth.
    let chain = headers(&[("x-forwarded-for", b"6.6.6.6, 198.51.100.9, 10.0.0.2")]);
    assert_eq!(proxies.resolve(ip("10.0.0.1"), &chain), ip("198.51.100.9"));
    let split = headers(&[
        ("x-forwarded-for", b"6.6.6.6"),
        ("x-forwarded-for", b"198.51.100.9:443"),
    ]);
    assert_eq!(proxies.resolve(ip("10.0.0.1"), &split), ip("198.51.100.9"));
    let bracketed = headers(&[("x-forwarded-for", b"[2001:db8::9]:443 , 10.0.0.2")]);
    assert_eq!(
        proxies.resolve(ip("10.0.0.1"), &bracketed),
        ip("2001:db8::9")
    );
}

#[test]
fn only_the_configured_header_is_read() {
    let proxies = ["10.0.0.0/8"];
    let all = headers(&[
        ("forwarded", b"for=192.0.2.60;proto=http"),
        ("x-forwarded-for", b"198.51.100.1"),
        ("x-real-ip", b"203.0.113.5"),
    ]);
    let peer = ip("10.0.0.1");
    let read = |source| behind(&proxies, source).resolve(peer, &all);
    assert_eq!(
        read(ClientIpSource::RightmostXForwardedFor),
        ip("198.51.100.1")
    );
    assert_eq!(read(ClientIpSource::RightmostForwarded), ip("192.0.2.60"));
    assert_eq!(read(ClientIpSource::XRealIp), ip("203.0.113.5"));
    assert_eq!(read(ClientIpSource::Peer), peer);
    // The default reads X-Forwarded-For and never Forwarded, even alone.
    let forwarded_only = headers(&[("forwarded", b"for=192.0.2.60")]);
    assert_eq!(xff_behind(&proxies).resolve(peer, &forwarded_only), peer);
    assert_eq!(
        ClientIp::default().source,
        ClientIpSource::RightmostXForwardedFor
    );
}

#[test]
fn forwarded_elements_are_parsed_as_rfc_7239_writes_them() {
    let proxies = behind(&["10.0.0.0/8"], ClientIpSource::RightmostForwarded);
    let peer = ip("10.0.0.1");
    let client = |value: &[u8]| proxies.resolve(peer, &headers(&[("forwarded", value)]));
    assert_eq!(
        client(b"for=192.0.2.60;proto=http;by=203.0.113.43, for=\"[2001:db8:cafe::17]:4711\""),
        ip("2001:db8:cafe::17")
    );
    // Case-insensitive names, quoted IPv4 with a port, an obfuscated port.
    assert_eq!(client(b"For=\"192.0.2.60:8080\""), ip("192.0.2.60"));
    assert_eq!(client(b"for=\"[2001:db8::1]:_p0rt\""), ip("2001:db8::1"));
    // Commas and semicolons inside quotes do not split.
    assert_eq!(
        client(b"for=198.51.100.1;host=\"a,b;c\", for=10.0.0.2"),
        ip("198.51.100.1")
    );
    // Escapes inside quoted strings.
    assert_eq!(client(b"for=\"198.51.100.\\1\""), ip("198.51.100.1"));
    // Mapped addresses are IPv4.
    assert_eq!(client(b"for=\"[::ffff:198.51.100.1]\""), ip("198.51.100.1"));
}

#[test]
fn garbage_stops_the_walk_at_the_last_good_address() {
    let xff = xff_behind(&["10.0.0.0/8"]);
    let forwarded = behind(&["10.0.0.0/8"], ClientIpSource::RightmostForwarded);
    let peer = ip("10.0.0.1");
    for garbage in [
        &b"not-an-ip"[..],
        b"unknown",
        b"_hidden",
        b"\xff\xfe",
        b"fe80::1%eth0",
        b"[fe80::1%25eth0]:80",
        b"010.0.0.1",
        b"198.51.100.1:",
        b"198.51.100.1:65536",
        b"\"198.51.100.1\"",
    ] {
        let mut value = garbage.to_vec();
        value.extend_from_slice(b", 10.0.0.3");
        let h = headers(&[("x-forwarded-for", &value)]);
        assert_eq!(xff.resolve(peer, &h), ip("10.0.0.3"), "{value:?}");
        // Behind the garbage, a forged address never counts.
        let mut value = b"198.51.100.66, ".to_vec();
        value.extend_from_slice(garbage);
        let h = headers(&[("x-forwarded-for", &value)]);
        assert_eq!(xff.resolve(peer, &h), peer, "{value:?}");
    }
    for element in [
        &b"for=unknown"[..],
        b"for=_hidden",
        b"for=\"[fe80::1%eth0]\"",
        b"proto=https",
        b"for=198.51.100.1;for=198.51.100.2",
        b"for=\"198.51.100.1",
        b"for=\"198.51.100.1\"x",
        b"for=",
        b"for=\"\"",
        b"for 198.51.100.1",
        b"f\"or=198.51.100.1",
        b"for=\"\xff\"",
        b";",
    ] {
        let mut value = b"for=198.51.100.66, ".to_vec();
        value.extend_from_slice(element);
        let h = headers(&[("forwarded", &value)]);
        assert_eq!(forwarded.resolve(peer, &h), peer, "{value:?}");
    }
    // An open quote cannot swallow the next field.
    let h = headers(&[
        ("forwarded", b"for=198.51.100.66, for=\"oops"),
        ("forwarded", b"for=10.0.0.4"),
    ]);
    assert_eq!(forwarded.resolve(peer, &h), ip("10.0.0.4"));
    // Empty list elements are skipped.
    let h = headers(&[
        ("x-forwarded-for", b",, 198.51.100.9 ,,"),
        ("x-forwarded-for", b""),
    ]);
    assert_eq!(xff.resolve(peer, &h), ip("198.51.100.9"));
    // Every hop trusted: the leftmost is the last known good.
    let h = headers(&[("x-forwarded-for", b"10.0.0.9, 10.0.0.8")]);
    assert_eq!(xff.resolve(peer, &h), ip("10.0.0.9"));
}

#[test]
fn a_field_that_is_not_text_keeps_its_good_entries() {
    let xff = xff_behind(&["10.0.0.0/8"]);
    let h = headers(&[("x-forwarded-for", b"\xff, 198.51.100.9, 10.0.0.3")]);
    assert_eq!(xff.resolve(ip("10.0.0.1"), &h), ip("198.51.100.9"));
}

#[test]
fn x_real_ip_is_read_like_a_one_entry_list() {
    let real_ip = behind(&["10.0.0.0/8"], ClientIpSource::XRealIp);
    let peer = ip("10.0.0.1");
    // A proxy that adds a field puts its own after the client's forgery.
    let added = headers(&[("x-real-ip", b"6.6.6.6"), ("x-real-ip", b"198.51.100.9")]);
    assert_eq!(real_ip.resolve(peer, &added), ip("198.51.100.9"));
    let set = headers(&[("x-real-ip", b"198.51.100.9")]);
    assert_eq!(real_ip.resolve(peer, &set), ip("198.51.100.9"));
    let garbage = headers(&[("x-real-ip", b"6.6.6.6"), ("x-real-ip", b"unknown")]);
    assert_eq!(real_ip.resolve(peer, &garbage), peer);
}

#[test]
fn an_ipv4_mapped_trusted_entry_trusts_its_ipv4_address_only() {
    let proxies = xff_behind(&["::ffff:10.0.0.1/128"]);
    let forged = headers(&[("x-forwarded-for", b"198.51.100.9")]);
    for peer in ["10.0.0.1", "::ffff:10.0.0.1"] {
        assert_eq!(proxies.resolve(ip(peer), &forged), ip("198.51.100.9"));
    }
    for peer in ["203.0.113.7", "::ffff:203.0.113.7", "10.0.0.2"] {
        assert_eq!(
            proxies.resolve(ip(peer), &forged),
            ip(peer).to_canonical(),
            "{peer} is not trusted"
        );
    }
    assert_eq!(
        canonical_net("::ffff:10.1.2.3/104".parse().unwrap()),
        "10.0.0.0/8".parse::<IpNet>().unwrap()
    );
    assert_eq!(
        canonical_net("::ffff:0:0/96".parse().unwrap()),
        "0.0.0.0/0".parse::<IpNet>().unwrap()
    );
    // Mapped addresses in the list are IPv4 too, trusted or not.
    let chain = headers(&[("x-forwarded-for", b"::ffff:198.51.100.9, ::ffff:10.0.0.1")]);
    assert_eq!(proxies.resolve(ip("10.0.0.1"), &chain), ip("198.51.100.9"));
}

#[test]
fn a_wide_ipv6_network_trusts_no_ipv4_peer() {
    let proxies = xff_behind(&["::/0"]);
    let forged = headers(&[("x-forwarded-for", b"198.51.100.9")]);
    assert_eq!(
        proxies.resolve(ip("2001:db8::1"), &forged),
        ip("198.51.100.9")
    );
    for peer in ["203.0.113.7", "::ffff:203.0.113.7"] {
        assert_eq!(proxies.resolve(ip(peer), &forged), ip("203.0.113.7"));
    }
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
    let exact = ClientIp {
        ipv6_prefix: 128,
        ..ClientIp::default()
    };
    assert_eq!(exact.identity(ip("2001:db8::1")), "2001%3Adb8%3A%3A1");
    // IPv4-mapped IPv6 peers are IPv4 clients.
    assert_eq!(
        ClientIp::default().resolve(ip("::ffff:203.0.113.7"), &HeaderMap::new()),
        ip("203.0.113.7")
    );
}

#[test]
fn a_twenty_thousand_hop_header_is_walked_to_the_right_client() {
    let proxies = xff_behind(&["10.0.0.0/8"]);
    let mut value = "6.6.6.6, ".repeat(19_998).into_bytes();
    value.extend_from_slice(b"198.51.100.9, 10.0.0.2");
    let h = headers(&[("x-forwarded-for", &value)]);
    assert_eq!(proxies.resolve(ip("10.0.0.1"), &h), ip("198.51.100.9"));
}
