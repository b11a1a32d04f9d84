//! Hostile identities and bodies, each limited exactly as any other: a
//! 10 kB user, users spelled like key syntax or like each other's escaped
//! form, header identities that are not UTF-8, and a 100 MB body on a denied
//! route (refused without being read). Time stands still (a manual clock):
//! the counts are exact.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use limiter_examples::{Options, app};
use limiter_tests::http::{parse_response, send, serve};
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Policy, Rule,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T0: Duration = Duration::from_secs(1_750_000_000);
/// `POST /posts/{id}/replies`: 5 per 60 s per user.
const REPLIES: usize = 5;

async fn ugc_in_process() -> SocketAddr {
    let limiter = Limiter::new(MemoryStore::with_clock(ManualClock::new(T0)));
    serve(app(limiter, Options::default())).await
}

async fn replies_as(addr: SocketAddr, user: &[u8], count: usize) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(count);
    for _ in 0..count {
        let headers: [(&str, &[u8]); 1] = [("x-user-id", user)];
        let response = send(addr, "POST", "/posts/1/replies", &headers, b"")
            .await
            .unwrap();
        statuses.push(response.status);
    }
    statuses
}

/// `allowed` times `allowed_status`, then 429 up to `count`.
fn allowed_then_denied(allowed_status: u16, allowed: usize, count: usize) -> Vec<u16> {
    let mut statuses = vec![allowed_status; allowed];
    statuses.resize(count, 429);
    statuses
}

#[tokio::test]
async fn a_ten_kilobyte_user_is_limited_as_itself() {
    let addr = ugc_in_process().await;
    let huge = vec![b'a'; 10 * 1024];
    // Past 128 bytes an identity is its SHA-256: one byte apart is another user.
    let mut other = huge.clone();
    *other.last_mut().unwrap() = b'b';
    for user in [&huge, &other] {
        assert_eq!(
            replies_as(addr, user, REPLIES + 2).await,
            allowed_then_denied(201, REPLIES, REPLIES + 2)
        );
    }
    assert_eq!(replies_as(addr, b"laoqian", 1).await, [201]);
}

#[tokio::test]
async fn users_spelled_like_key_syntax_or_escapes_never_share_a_quota() {
    let addr = ugc_in_process().await;
    // Were any two the same key, the later one would start denied.
    let users: [&[u8]; 14] = [
        b"a:b",
        b"a%3Ab",
        b"a%253Ab",
        b"a",
        b"b",
        b"{tag}",
        b"%7Btag%7D",
        b"{tag}:posts-create_reply",
        b"tag",
        b"x%",
        b"x%25",
        b"%",
        b"%25",
        b"u:1:posts-create_reply",
    ];
    for user in users {
        assert_eq!(
            replies_as(addr, user, REPLIES + 1).await,
            allowed_then_denied(201, REPLIES, REPLIES + 1),
            "{}",
            String::from_utf8_lossy(user)
        );
    }
}

#[tokio::test]
async fn utf8_users_are_users_and_other_bytes_are_none_in_the_ugc_server() {
    let addr = ugc_in_process().await;
    for user in ["小明".as_bytes(), b"laoqian", "\u{fffd}".as_bytes()] {
        assert_eq!(
            replies_as(addr, user, REPLIES + 1).await,
            allowed_then_denied(201, REPLIES, REPLIES + 1),
            "{}",
            String::from_utf8_lossy(user)
        );
    }
    // The example's user resolver takes text only: bytes that are not UTF-8
    // are refused as unauthenticated, every time (the layer's own header
    // identities take any bytes: see the next test).
    for user in [&b"\xff"[..], b"\xe5\xb0"] {
        assert_eq!(
            replies_as(addr, user, REPLIES + 1).await,
            [401; REPLIES + 1]
        );
    }
}

#[tokio::test]
async fn header_identities_that_are_not_utf8_are_limited_as_themselves() {
    let policy = Policy::sliding_log([Rule::new(5, Duration::from_secs(60)).unwrap()]).unwrap();
    let limiter = Limiter::new(MemoryStore::with_clock(ManualClock::new(T0)));
    let router = Router::new()
        .route(
            "/posts/1/replies",
            post(|| async { (axum::http::StatusCode::CREATED, "created") }),
        )
        .route_layer(LimitLayer::new(
            "replies",
            policy,
            KeySource::header("x-user-id".parse().unwrap()),
        ))
        .layer(LimiterLayer::new(limiter));
    let addr = serve(router).await;
    // Each its own quota: bytes that are not text, their lossy decoding,
    // and the percent-encoded text of those bytes.
    let users: [&[u8]; 6] = [
        b"\xff",
        b"\xfe",
        b"\xff\xfe",
        b"\xef\xbf\xbd",
        b"%FF",
        &[b'\xff'; 10 * 1024],
    ];
    for user in users {
        assert_eq!(
            replies_as(addr, user, REPLIES + 1).await,
            allowed_then_denied(201, REPLIES, REPLIES + 1),
            "{user:?}"
        );
    }
}

/// Reads one response whose body has a `content-length`, without waiting for
/// the connection to close.
async fn read_response(stream: &mut TcpStream) -> limiter_tests::http::Response {
    let mut raw = Vec::new();
    let mut buf = [0; 4096];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = parse_response(&raw[..end + 4]).expect("a response head");
            let length: usize = head.header("content-length").parse().unwrap();
            if raw.len() >= end + 4 + length {
                return parse_response(&raw[..end + 4 + length]).unwrap();
            }
        }
        let read = stream
            .read(&mut buf)
            .await
            .expect("the connection stays up");
        assert!(read > 0, "closed before a whole response: {raw:?}");
        raw.extend_from_slice(&buf[..read]);
    }
}

#[tokio::test]
async fn a_hundred_megabyte_body_on_a_denied_route_is_refused_unread() {
    let addr = ugc_in_process().await;
    replies_as(addr, b"laoqian", REPLIES).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /posts/1/replies HTTP/1.1\r\nhost: {addr}\r\nx-user-id: laoqian\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        100 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // 64 kB of the 100 MB, then nothing more: a server that read the body
    // before deciding would never answer.
    stream.write_all(&vec![b' '; 64 * 1024]).await.unwrap();
    let response = tokio::time::timeout(Duration::from_secs(30), read_response(&mut stream))
        .await
        .expect("an answer while 99.9% of the body is unsent");
    assert_eq!(response.status, 429, "{response:#?}");
    assert!(
        response.body.contains("quota-exceeded"),
        "{}",
        response.body
    );
}
