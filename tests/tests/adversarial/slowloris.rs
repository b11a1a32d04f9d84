//! Slowloris against the `ugc` binary: clients that send part of a request
//! and stall, or drip their bodies a byte at a time, more of them than the
//! server serves at once. Each is closed once the header-read or the
//! body-read timeout passes (never before), the server keeps answering, and
//! it stays up; a body sent at a normal pace is read whole. Short settings
//! through the environment keep this fast.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use limiter_tests::http::send;
use limiter_tests::{UgcServer, ugc_start_up_error};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(300);
const BODY_READ_TIMEOUT: Duration = Duration::from_millis(300);
/// How often a dripping client sends one more byte of its body: well
/// within the timeout, so only a deadline on the whole body stops it.
const DRIP_EVERY: Duration = Duration::from_millis(50);
const MAX_CONNECTIONS: usize = 8;
/// Far more than any test needs: it only stops a broken server from hanging the test.
const HANG_GUARD: Duration = Duration::from_secs(20);

fn start() -> UgcServer {
    UgcServer::start(&[
        (
            "LIMITER_HEADER_READ_TIMEOUT_MS",
            &HEADER_READ_TIMEOUT.as_millis().to_string(),
        ),
        (
            "LIMITER_BODY_READ_TIMEOUT_MS",
            &BODY_READ_TIMEOUT.as_millis().to_string(),
        ),
        ("LIMITER_MAX_CONNECTIONS", &MAX_CONNECTIONS.to_string()),
    ])
}

/// Waits for the server to close `stream`: what it sent before (nothing, or
/// a `408 Request Timeout`), and when it closed.
async fn closed_by_server(mut stream: impl AsyncRead + Unpin) -> (Vec<u8>, Instant) {
    let mut received = Vec::new();
    let read = tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut received)).await;
    let closed_at = Instant::now();
    match read {
        Ok(Ok(_)) => {}
        // A reset closes it too.
        Ok(Err(error)) => assert!(
            matches!(
                error.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "{error}"
        ),
        Err(_) => panic!("the server kept a stalled connection open for {HANG_GUARD:?}"),
    }
    (received, closed_at)
}

fn assert_nothing_or_408(received: &[u8]) {
    assert!(
        received.is_empty() || received.starts_with(b"HTTP/1.1 408 "),
        "{}",
        String::from_utf8_lossy(received)
    );
}

/// Three times as many clients as the server serves at once, each opened
/// by `open` (with its number): each is closed by the server, `timeout`
/// after it sent or later, with nothing or a 408; a health check waiting
/// behind them in the backlog is answered once slots free, and the server
/// stays up.
async fn assert_each_closed_after<S: AsyncRead + Unpin>(
    timeout: Duration,
    mut open: impl AsyncFnMut(SocketAddr, u8) -> (Instant, S),
) {
    let mut server = start();
    let mut clients = Vec::new();
    for n in 0..3 * MAX_CONNECTIONS as u8 {
        clients.push(open(server.addr(), n).await);
    }
    let during = tokio::spawn(health(server.addr()));
    for (sent_at, stream) in clients {
        let (received, closed_at) = closed_by_server(stream).await;
        assert_nothing_or_408(&received);
        assert!(
            closed_at - sent_at >= timeout,
            "closed after {:?}, before the timeout",
            closed_at - sent_at
        );
    }
    assert_eq!(during.await.unwrap(), 200);
    assert_eq!(health(server.addr()).await, 200);
    assert!(server.is_running());
}

async fn health(addr: SocketAddr) -> u16 {
    tokio::time::timeout(HANG_GUARD, send(addr, "GET", "/health", &[], b""))
        .await
        .expect("/health answers")
        .expect("/health answers")
        .status
}

#[tokio::test]
async fn stalled_requests_are_closed_after_the_header_read_timeout() {
    assert_each_closed_after(HEADER_READ_TIMEOUT, async |addr, _| {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nhost: ugc\r\nx-slow: ")
            .await
            .unwrap();
        (Instant::now(), stream)
    })
    .await;
}

/// A `POST /login` of a 100-byte body from `127.0.0.{n}` (each client an
/// address of its own, under the login limit's 5 per address), its head
/// sent whole, its body one byte every [`DRIP_EVERY`] until the server
/// closes the connection.
async fn dripping_login(addr: SocketAddr, n: u8) -> (Instant, impl AsyncRead + Unpin) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, n], 0))).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    stream
        .write_all(
            b"POST /login HTTP/1.1\r\nhost: ugc\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{",
        )
        .await
        .unwrap();
    let sent_at = Instant::now();
    let (read, mut write) = stream.into_split();
    tokio::spawn(async move {
        for _ in 0..99 {
            tokio::time::sleep(DRIP_EVERY).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    (sent_at, read)
}

#[tokio::test]
async fn dripped_bodies_are_answered_408_and_closed_after_the_body_timeout() {
    assert_each_closed_after(BODY_READ_TIMEOUT, async |addr, n| {
        dripping_login(addr, 10 + n).await
    })
    .await;
}

#[tokio::test]
async fn a_body_sent_at_a_normal_pace_is_read_whole() {
    let server = start();
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let body = br#"{"user": "alice", "password": "let-me-in"}"#;
    let head = format!(
        "POST /login HTTP/1.1\r\nhost: ugc\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Two halves, apart by a third of the timeout.
    let (first, second) = body.split_at(body.len() / 2);
    stream.write_all(first).await.unwrap();
    tokio::time::sleep(BODY_READ_TIMEOUT / 3).await;
    stream.write_all(second).await.unwrap();
    let mut received = Vec::new();
    tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut received))
        .await
        .expect("a response")
        .unwrap();
    let received = String::from_utf8_lossy(&received);
    assert!(received.starts_with("HTTP/1.1 200 OK"), "{received}");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_timeout() {
    let mut server = start();
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let sent_at = Instant::now();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nhost: ugc\r\n\r\n")
        .await
        .unwrap();
    // The whole response, then silence: the connection counts as waiting
    // for the next request's head.
    let expected_body = br#"{"status":"ok"}"#;
    let mut received = Vec::new();
    let mut buf = [0; 1024];
    while !received.ends_with(expected_body) {
        let read = tokio::time::timeout(HANG_GUARD, stream.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        assert!(read > 0, "closed before the response");
        received.extend_from_slice(&buf[..read]);
    }
    assert!(received.starts_with(b"HTTP/1.1 200 OK"));
    let (after, closed_at) = closed_by_server(stream).await;
    assert_nothing_or_408(&after);
    // The timeout runs from the response, which came after the request.
    assert!(closed_at - sent_at >= HEADER_READ_TIMEOUT);
    assert!(server.is_running());
}

#[tokio::test]
async fn malformed_serving_settings_stop_the_ugc_binary_at_start_up() {
    for (name, value, reason) in [
        ("LIMITER_MAX_CONNECTIONS", "0", "must be above zero"),
        ("LIMITER_MAX_CONNECTIONS", "many", "invalid digit"),
        ("LIMITER_HEADER_READ_TIMEOUT_MS", "0", "must be above zero"),
        ("LIMITER_HEADER_READ_TIMEOUT_MS", "-5", "invalid digit"),
        ("LIMITER_BODY_READ_TIMEOUT_MS", "0", "must be above zero"),
    ] {
        let log = ugc_start_up_error(&[(name, value)]);
        assert!(
            log.contains(&format!("{name} {value:?}: {reason}")),
            "{log}"
        );
    }
}
