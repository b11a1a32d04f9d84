//! Forged client addresses. Behind a trusted proxy that writes one header, a
//! client forging the others, or prepending lies to that one, still gets
//! exactly `GET /feed`'s burst of 20; so does a client forging every header
//! straight to the server. In process, time stands still (a manual clock),
//! so the counts are exact; against the binary, the same replay checks
//! `LIMITER_CLIENT_IP_HEADER`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use limiter_examples::{Options, app, parse_trusted_proxies};
use limiter_tests::http::{send, send_from, serve};
use limiter_tests::{UgcServer, ugc_start_up_error};
use limiter_tower::{ClientIpSource, Limiter, ManualClock, MemoryStore};

const T0: Duration = Duration::from_secs(1_750_000_000);
/// `GET /feed`: GCRA, 20 at once.
const BURST: usize = 20;
const REAL_CLIENT: &str = "198.51.100.7";

/// The UGC router in process, its clock stopped, believing `proxies`
/// (written as in `LIMITER_TRUSTED_PROXIES`).
async fn ugc_in_process(proxies: &str, source: ClientIpSource) -> SocketAddr {
    let limiter = Limiter::new(MemoryStore::with_clock(ManualClock::new(T0)));
    let options = Options {
        trusted_proxies: parse_trusted_proxies(proxies).expect("valid proxies"),
        client_ip_source: source,
        ..Options::default()
    };
    serve(app(limiter, options)).await
}

/// A different forged address for each `i`, in one of several forms.
fn forged(i: usize) -> String {
    let (high, low) = (i / 250 % 250, i % 250);
    match i % 4 {
        0 => format!("203.0.{high}.{low}"),
        1 => format!("::ffff:192.0.{high}.{low}"),
        2 => format!("2001:db8:{high:x}:{low:x}::1"),
        _ => format!("100.64.{high}.{low}"),
    }
}

/// The headers of request `i` from the real client through a proxy that
/// writes `source`'s header: the client forged every header, and the proxy
/// appended the truth to its own.
fn through_proxy(source: ClientIpSource, client: &str, i: usize) -> Vec<(&'static str, Vec<u8>)> {
    let lie = forged(i);
    let mut xff = lie.clone().into_bytes();
    let mut forwarded = format!("for=\"[{lie}]\";proto=https").into_bytes();
    let mut real_ip = vec![lie.clone().into_bytes()];
    match source {
        ClientIpSource::RightmostXForwardedFor => {
            xff.extend_from_slice(format!(", {client}").as_bytes());
        }
        ClientIpSource::RightmostForwarded => {
            forwarded.extend_from_slice(format!(", for={client}").as_bytes());
        }
        ClientIpSource::XRealIp => real_ip.push(client.as_bytes().to_vec()),
        _ => unreachable!("not a header"),
    }
    let mut headers = vec![("x-forwarded-for", xff), ("forwarded", forwarded)];
    headers.extend(real_ip.into_iter().map(|value| ("x-real-ip", value)));
    headers
}

/// Statuses of `count` `GET /feed` requests, request `i` with `headers(i)`.
async fn feed_statuses(
    addr: SocketAddr,
    count: usize,
    headers: impl Fn(usize) -> Vec<(&'static str, Vec<u8>)>,
) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(count);
    for i in 0..count {
        let headers = headers(i);
        let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        let response = send(addr, "GET", "/feed", &headers, b"").await.unwrap();
        statuses.push(response.status);
    }
    statuses
}

/// The burst passes, and nothing more.
fn burst_then_denied(count: usize) -> Vec<u16> {
    let mut statuses = vec![200; BURST];
    statuses.resize(count, 429);
    statuses
}

const SOURCES: [ClientIpSource; 3] = [
    ClientIpSource::RightmostXForwardedFor,
    ClientIpSource::RightmostForwarded,
    ClientIpSource::XRealIp,
];

#[tokio::test]
async fn forging_the_headers_the_proxy_does_not_write_buys_nothing() {
    for source in SOURCES {
        let addr = ugc_in_process("127.0.0.1/32", source).await;
        let statuses = feed_statuses(addr, 200, |i| through_proxy(source, REAL_CLIENT, i)).await;
        assert_eq!(statuses, burst_then_denied(200), "{source:?}");
        // The key is the forwarded client, not the proxy: another client
        // behind it has its own burst.
        let other = feed_statuses(addr, 1, |i| through_proxy(source, "198.51.100.8", i)).await;
        assert_eq!(other, [200], "{source:?}");
    }
}

#[tokio::test]
async fn the_ugc_binary_reads_the_header_named_by_limiter_client_ip_header() {
    // Real time: 40 requests well within the 600 ms GCRA takes to free one.
    for (header, source) in [
        (None, ClientIpSource::RightmostXForwardedFor),
        (
            Some("x-forwarded-for"),
            ClientIpSource::RightmostXForwardedFor,
        ),
        (Some("Forwarded"), ClientIpSource::RightmostForwarded),
        (Some("x-real-ip"), ClientIpSource::XRealIp),
    ] {
        let mut env = vec![("LIMITER_TRUSTED_PROXIES", "127.0.0.1/32")];
        env.extend(header.map(|header| ("LIMITER_CLIENT_IP_HEADER", header)));
        let server = UgcServer::start(&env);
        let statuses =
            feed_statuses(server.addr(), 40, |i| through_proxy(source, REAL_CLIENT, i)).await;
        assert_eq!(statuses, burst_then_denied(40), "{header:?}");
    }
}

#[tokio::test]
async fn an_unknown_client_ip_header_stops_the_ugc_binary_at_start_up() {
    let log = ugc_start_up_error(&[
        ("LIMITER_TRUSTED_PROXIES", "10.0.0.0/8"),
        ("LIMITER_CLIENT_IP_HEADER", "x-forwarded-host"),
    ]);
    assert!(
        log.contains(
            "LIMITER_CLIENT_IP_HEADER: \"x-forwarded-host\" is not a header the client address \
             can be read from: expected x-forwarded-for, forwarded or x-real-ip"
        ),
        "{log}"
    );
    let log = ugc_start_up_error(&[("LIMITER_TRUSTED_PROXIES", "10.0.0.0/33")]);
    assert!(
        log.contains(
            "LIMITER_TRUSTED_PROXIES: \"10.0.0.0/33\" is not an IP network (CIDR) nor an address"
        ),
        "{log}"
    );
}

#[tokio::test]
async fn a_spoofed_header_from_an_untrusted_peer_is_ignored() {
    let every_header_forged = |i: usize| {
        let lie = forged(i);
        vec![
            ("x-forwarded-for", lie.clone().into_bytes()),
            ("forwarded", format!("for=\"[{lie}]\"").into_bytes()),
            ("x-real-ip", lie.into_bytes()),
        ]
    };
    // No trusted proxies, whatever the source; or proxies that are not the peer.
    for (proxies, source) in [
        ("", ClientIpSource::RightmostXForwardedFor),
        ("", ClientIpSource::RightmostForwarded),
        ("", ClientIpSource::XRealIp),
        ("10.0.0.0/8, ::/0", ClientIpSource::RightmostXForwardedFor),
    ] {
        let addr = ugc_in_process(proxies, source).await;
        let statuses = feed_statuses(addr, 60, every_header_forged).await;
        assert_eq!(statuses, burst_then_denied(60), "{proxies:?} {source:?}");
    }
}

#[tokio::test]
async fn a_trusted_proxy_written_ipv4_mapped_trusts_that_address_only() {
    let addr = ugc_in_process("::ffff:127.0.0.1", ClientIpSource::RightmostXForwardedFor).await;
    let xff = |client: &'static str| {
        move |_: usize| vec![("x-forwarded-for", client.as_bytes().to_vec())]
    };
    // From 127.0.0.1 the header is believed: each client its own burst.
    assert_eq!(
        feed_statuses(addr, 25, xff(REAL_CLIENT)).await,
        burst_then_denied(25)
    );
    assert_eq!(feed_statuses(addr, 1, xff("198.51.100.8")).await, [200]);
    // From 127.0.0.2 it is not: every lie is 127.0.0.2's.
    let other_peer: IpAddr = "127.0.0.2".parse().unwrap();
    let mut statuses = Vec::new();
    for i in 0..25 {
        let lie = forged(i);
        let headers: [(&str, &[u8]); 1] = [("x-forwarded-for", lie.as_bytes())];
        let response = send_from(other_peer, addr, "GET", "/feed", &headers, b"")
            .await
            .unwrap();
        statuses.push(response.status);
    }
    assert_eq!(statuses, burst_then_denied(25));
}

#[tokio::test]
async fn a_twenty_thousand_entry_forwarded_for_picks_the_right_client() {
    let addr = ugc_in_process("127.0.0.1/32", ClientIpSource::RightmostXForwardedFor).await;
    // 19,999 lies, different each time, then the client the proxy saw
    // (about 300 kB, under hyper's limit on a request's head).
    let lies_then_client = |i: usize| {
        let mut value: String = (0..19_999)
            .map(|j| {
                let n = i * 20_000 + j;
                format!("6.{}.{}.{}, ", (n >> 16) & 255, (n >> 8) & 255, n & 255)
            })
            .collect();
        value.push_str(REAL_CLIENT);
        vec![("x-forwarded-for", value.into_bytes())]
    };
    assert_eq!(
        feed_statuses(addr, BURST + 1, lies_then_client).await,
        burst_then_denied(BURST + 1)
    );
    // A client behind 19,999 trusted hops is found too.
    let behind_hops = |_: usize| {
        let mut value = String::from("198.51.100.8");
        value.push_str(&", 127.0.0.1".repeat(19_999));
        vec![("x-forwarded-for", value.into_bytes())]
    };
    assert_eq!(feed_statuses(addr, 1, behind_hops).await, [200]);
}
