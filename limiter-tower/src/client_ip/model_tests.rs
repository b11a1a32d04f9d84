//! Property test: random forwarding chains in every header at once, each
//! entry written in one of its many textual forms or as garbage, resolved
//! for each source and compared with a model that never parses: the
//! generator knows what each entry means, and the model walks those
//! meanings from the right.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;

use super::{ClientIp, ClientIpSource};

/// As configured: the middle one written IPv4-mapped, meaning 192.168.0.0/16.
const TRUSTED: [&str; 3] = ["10.0.0.0/8", "::ffff:192.168.0.0/112", "2001:db8:aaaa::/48"];

fn model_is_trusted(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            a == 10 || (a == 192 && b == 168)
        }
        IpAddr::V6(v6) => v6.segments()[..3] == [0x2001, 0xdb8, 0xaaaa],
    }
}

/// The client by the contract, walking the entries' meanings from the right.
fn model_client(peer: IpAddr, hops: &[Option<IpAddr>]) -> IpAddr {
    if !model_is_trusted(peer) {
        return peer;
    }
    let mut last_good = peer;
    for hop in hops.iter().rev() {
        match *hop {
            None => return last_good,
            Some(ip) if !model_is_trusted(ip) => return ip,
            Some(ip) => last_good = ip,
        }
    }
    last_good
}

/// One list entry: what it means (`None`: not an address) and its text.
#[derive(Debug, Clone)]
struct Entry {
    meaning: Option<IpAddr>,
    text: Vec<u8>,
    /// A quote left open runs to the end of its field: nothing may follow.
    ends_field: bool,
}

fn entry(meaning: Option<IpAddr>, text: impl Into<Vec<u8>>) -> Entry {
    Entry {
        meaning,
        text: text.into(),
        ends_field: false,
    }
}

/// Addresses on both sides of every trusted network's edge.
fn address() -> impl Strategy<Value = IpAddr> {
    let v4 =
        |a: u8, b: u8| (any::<u8>(), any::<u8>()).prop_map(move |(c, d)| Ipv4Addr::new(a, b, c, d));
    let v6 = |a: u16, b: u16, c: u16| {
        (any::<u16>(), any::<u16>()).prop_map(move |(d, e)| Ipv6Addr::new(a, b, c, d, 0, 0, 0, e))
    };
    prop_oneof![
        v4(10, 0).prop_map(IpAddr::V4),
        v4(192, 168).prop_map(IpAddr::V4),
        v4(198, 51).prop_map(IpAddr::V4),
        v4(11, 0).prop_map(IpAddr::V4),
        v4(192, 169).prop_map(IpAddr::V4),
        v6(0x2001, 0xdb8, 0xaaaa).prop_map(IpAddr::V6),
        v6(0x2001, 0xdb8, 0xaaab).prop_map(IpAddr::V6),
        v6(0x2001, 0xdb8, 0xbbbb).prop_map(IpAddr::V6),
    ]
}

fn whitespace() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", " ", "\t", "  "])
}

/// `ip` as `X-Forwarded-For` or `X-Real-IP` may carry it.
fn list_form(ip: IpAddr) -> impl Strategy<Value = String> {
    let forms: Vec<String> = match ip {
        IpAddr::V4(v4) => vec![
            format!("{v4}"),
            format!("{v4}:{{port}}"),
            format!("::ffff:{v4}"),
            format!("[::ffff:{v4}]"),
            format!("[::ffff:{v4}]:{{port}}"),
        ],
        IpAddr::V6(v6) => vec![
            format!("{v6}"),
            format!("{v6}").to_uppercase(),
            format!("[{v6}]"),
            format!("[{v6}]:{{port}}"),
        ],
    };
    (
        prop::sample::select(forms),
        any::<u16>(),
        whitespace(),
        whitespace(),
    )
        .prop_map(|(form, port, before, after)| {
            format!(
                "{before}{}{after}",
                form.replace("{port}", &port.to_string())
            )
        })
}

fn non_utf8() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0x80u8..=0xff, 1..4)
        .prop_filter("not UTF-8", |bytes| std::str::from_utf8(bytes).is_err())
}

fn list_entry() -> impl Strategy<Value = Entry> {
    let garbage = prop_oneof![
        prop::sample::select(vec![
            "unknown",
            "_hidden",
            "fe80::1%eth0",
            "[fe80::1%eth0]:80",
            "not-an-ip",
            "1.2.3",
            "256.1.1.1",
            "010.0.0.1",
            "198.51.100.1:65536",
            "198.51.100.1:",
            "\"198.51.100.1\"",
            "[198.51.100.1]",
            "2001:db8::1]",
            "\u{e9}t\u{e9}",
        ])
        .prop_map(|text| entry(None, text)),
        non_utf8().prop_map(|bytes| entry(None, bytes)),
    ];
    prop_oneof![
        4 => address().prop_flat_map(|ip| list_form(ip).prop_map(move |text| entry(Some(ip), text))),
        1 => garbage,
    ]
}

/// `ip` as a `for=` value in `Forwarded`.
fn node_form(ip: IpAddr) -> impl Strategy<Value = String> {
    let forms: Vec<String> = match ip {
        IpAddr::V4(v4) => vec![
            format!("{v4}"),
            format!("\"{v4}\""),
            format!("\"{v4}:{{port}}\""),
            format!("\"[::ffff:{v4}]\""),
            format!("\"[::ffff:{v4}]:{{port}}\""),
        ],
        IpAddr::V6(v6) => vec![
            format!("\"[{v6}]\""),
            format!("\"[{v6}]:{{port}}\""),
            format!("\"[{v6}]:_obf-port\""),
        ],
    };
    (prop::sample::select(forms), any::<u16>())
        .prop_map(|(form, port)| form.replace("{port}", &port.to_string()))
}

/// Parameters besides `for`, some with quoted commas and semicolons.
fn other_parameters() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(
        prop::sample::select(vec![
            "proto=https",
            "proto=http",
            "by=_proxy",
            "by=\"[2001:db8::1]:443\"",
            "host=example.com",
            "host=\"a,b;c\"",
            "host=\"q\\\"uote\"",
        ]),
        0..3,
    )
}

fn forwarded_entry() -> impl Strategy<Value = Entry> {
    let element = |node: String, others: Vec<&'static str>, name: &'static str, at: usize| {
        let mut pairs: Vec<String> = others.iter().map(|p| p.to_string()).collect();
        pairs.insert(at.min(pairs.len()), format!("{name}={node}"));
        pairs.join(";")
    };
    let name = || prop::sample::select(vec!["for", "For", "FOR"]);
    let address = (address(), other_parameters(), name(), 0..3usize).prop_flat_map(
        move |(ip, others, name, at)| {
            node_form(ip)
                .prop_map(move |node| entry(Some(ip), element(node, others.clone(), name, at)))
        },
    );
    let garbage = prop_oneof![
        (
            prop::sample::select(vec![
                "unknown",
                "\"unknown\"",
                "_hidden",
                "\"_hidden:_port\"",
                "\"[fe80::1%eth0]\"",
                "\"\"",
                "\"198.51.100.7\"x",
                "198.51.100.7\"x\"",
                "\"[198.51.100.7]\"",
            ]),
            other_parameters(),
            name(),
            0..3usize,
        )
            .prop_map(move |(node, others, name, at)| {
                entry(None, element(node.to_owned(), others, name, at))
            }),
        prop::sample::select(vec![
            "proto=https",
            ";",
            "for=198.51.100.7;for=198.51.100.8",
            "for",
            "=198.51.100.7",
            "f r=198.51.100.7",
        ])
        .prop_map(|text| entry(None, text)),
        non_utf8().prop_map(|bytes| {
            let mut text = b"for=\"".to_vec();
            text.extend_from_slice(&bytes);
            text.push(b'"');
            entry(None, text)
        }),
        Just(Entry {
            meaning: None,
            text: b"for=198.51.100.7;host=\"open, for=198.51.100.8".to_vec(),
            ends_field: true,
        }),
    ];
    prop_oneof![4 => address, 1 => garbage]
}

/// A header's entries spread over fields.
#[derive(Debug, Clone)]
struct Chain {
    /// Each entry, and whether a new field starts after it.
    entries: Vec<(Entry, bool, &'static str)>,
    leading_empty_field: bool,
}

fn chain(entry: impl Strategy<Value = Entry>) -> impl Strategy<Value = Chain> {
    let separator = prop::sample::select(vec![", ", ",", " , ", ",, ", ",\t,"]);
    (
        prop::collection::vec((entry, prop::bool::weighted(0.25), separator), 0..8),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(entries, leading_empty_field)| Chain {
            entries,
            leading_empty_field,
        })
}

impl Chain {
    fn meanings(&self) -> Vec<Option<IpAddr>> {
        self.entries
            .iter()
            .map(|(entry, ..)| entry.meaning)
            .collect()
    }

    fn fields(&self) -> Vec<Vec<u8>> {
        let mut fields = Vec::new();
        if self.leading_empty_field {
            fields.push(Vec::new());
        }
        let mut field = Vec::new();
        for (i, (entry, new_field, separator)) in self.entries.iter().enumerate() {
            if !field.is_empty() {
                field.extend_from_slice(separator.as_bytes());
            }
            field.extend_from_slice(&entry.text);
            if *new_field || entry.ends_field || i + 1 == self.entries.len() {
                fields.push(std::mem::take(&mut field));
            }
        }
        fields
    }
}

fn peer() -> impl Strategy<Value = (IpAddr, bool)> {
    (address(), any::<bool>())
}

fn headers(chains: [(&'static str, &Chain); 3]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, chain) in chains {
        for field in chain.fields() {
            let value = HeaderValue::from_bytes(&field).expect("a valid field value");
            map.append(HeaderName::from_static(name), value);
        }
    }
    map
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_client_is_the_rightmost_untrusted_address_of_the_configured_header(
        (peer, mapped) in peer(),
        xff in chain(list_entry()),
        forwarded in chain(forwarded_entry()),
        real_ip in chain(list_entry()),
    ) {
        let headers = headers([
            ("x-forwarded-for", &xff),
            ("forwarded", &forwarded),
            ("x-real-ip", &real_ip),
        ]);
        let seen_peer = match peer {
            IpAddr::V4(v4) if mapped => IpAddr::V6(v4.to_ipv6_mapped()),
            _ => peer,
        };
        for (source, expected) in [
            (ClientIpSource::Peer, peer),
            (ClientIpSource::RightmostXForwardedFor, model_client(peer, &xff.meanings())),
            (ClientIpSource::RightmostForwarded, model_client(peer, &forwarded.meanings())),
            (ClientIpSource::XRealIp, model_client(peer, &real_ip.meanings())),
        ] {
            let mut client_ip = ClientIp { source, ..ClientIp::default() };
            client_ip.set_trusted_proxies(TRUSTED.iter().map(|net| net.parse().unwrap()));
            prop_assert_eq!(client_ip.resolve(seen_peer, &headers), expected, "{:?}", source);
            // Without trusted proxies, no header counts.
            let untrusting = ClientIp { source, ..ClientIp::default() };
            prop_assert_eq!(untrusting.resolve(seen_peer, &headers), peer);
        }
    }
}
