//! Hostile input over real HTTP: spoofed and garbage forwarding headers,
//! huge and non-UTF-8 identities. Never a 5xx; trusted proxies work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use limiter_examples::{Options, app};
use limiter_tests::http::{send, serve, status_of};
use limiter_tower::{Limiter, LimiterLayer, MemoryStore, rate_limit};

async fn server(proxies: &[&str]) -> SocketAddr {
    let options = Options {
        trusted_proxies: proxies.iter().map(|p| p.parse().unwrap()).collect(),
        ..Options::default()
    };
    serve(app(Limiter::new(MemoryStore::new()), options)).await
}

/// `POST /posts` twice as the same client: the second is a duplicate (429).
/// Returns the two statuses.
async fn post_twice(addr: SocketAddr, forwarded: &[(&str, &[u8])]) -> (u16, u16) {
    let first = status_of(addr, "POST", "/posts", forwarded).await;
    let second = status_of(addr, "POST", "/posts", forwarded).await;
    (first, second)
}

#[tokio::test]
async fn a_spoofed_forwarded_for_from_an_untrusted_peer_is_ignored() {
    // The peer (127.0.0.1) is not a trusted proxy: every request is 127.0.0.1's.
    let addr = server(&["10.0.0.0/8"]).await;
    assert_eq!(
        post_twice(addr, &[("x-forwarded-for", b"1.1.1.1")]).await,
        (201, 429)
    );
    let other_lie = send(
        addr,
        "POST",
        "/posts",
        &[("x-forwarded-for", b"2.2.2.2")],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(other_lie.status, 429);
}

#[tokio::test]
async fn through_a_trusted_proxy_the_forwarded_client_counts() {
    let addr = server(&["127.0.0.0/8"]).await;
    assert_eq!(
        post_twice(addr, &[("x-forwarded-for", b"198.51.100.1")]).await,
        (201, 429)
    );
    // The client's own prefix is not believed: the rightmost untrusted address counts.
    let chained: &[(&str, &[u8])] = &[("x-forwarded-for", b"198.51.100.1, 198.51.100.2")];
    assert_eq!(post_twice(addr, chained).await, (201, 429));
    let bracketed: &[(&str, &[u8])] = &[("x-forwarded-for", b"[2001:db8:1:2::5]:443")];
    assert_eq!(post_twice(addr, bracketed).await, (201, 429));
    // The same /64 is the same client; another /64 is not.
    let same_64: &[(&str, &[u8])] = &[("x-forwarded-for", b"2001:db8:1:2::9")];
    assert_eq!(status_of(addr, "POST", "/posts", same_64).await, 429);
    let other_64: &[(&str, &[u8])] = &[("x-forwarded-for", b"2001:db8:1:3::9")];
    assert_eq!(status_of(addr, "POST", "/posts", other_64).await, 201);
}

#[tokio::test]
async fn hostile_headers_never_cause_a_server_error() {
    let addr = server(&["127.0.0.0/8"]).await;
    let huge = vec![b'a'; 10 * 1024];
    let attempts: [(&str, &str, &str, &[u8]); 11] = [
        ("POST", "/posts/1/replies", "x-user-id", &huge),
        ("POST", "/posts/1/replies", "x-user-id", b"\xff\xfe\xfd"),
        ("POST", "/posts/1/replies", "x-user-id", b""),
        ("POST", "/posts/1/likes", "x-user-id", b"{tag}:x"),
        ("POST", "/posts", "x-forwarded-for", b"not an address, ,,"),
        ("POST", "/posts", "x-forwarded-for", b"\xff\xfe"),
        ("POST", "/posts", "x-forwarded-for", &huge),
        ("POST", "/posts", "forwarded", b"for=unknown;proto=\""),
        ("POST", "/posts", "forwarded", b"for=\"[::1"),
        ("GET", "/feed", "forwarded", b";;;,,,="),
        ("GET", "/feed", "x-forwarded-for", b"999.999.999.999"),
    ];
    for (method, path, name, value) in attempts {
        let response = send(addr, method, path, &[(name, value)], b"")
            .await
            .unwrap();
        assert!(
            response.status < 500,
            "{method} {path} with {name}: {value:?} answered {}",
            response.status
        );
    }
    // Each attempt had an answer and the server still serves.
    let health = send(addr, "GET", "/health", &[], b"").await.unwrap();
    assert_eq!(health.status, 200);
    // A 10 kB user is a user (hashed into the key), not a missing one.
    let huge_user = send(
        addr,
        "POST",
        "/posts/2/replies",
        &[("x-user-id", &huge)],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(huge_user.status, 201);
    // A user header that is not text is no user.
    let binary_user = send(
        addr,
        "POST",
        "/posts/2/replies",
        &[("x-user-id", b"\xff")],
        b"",
    )
    .await
    .unwrap();
    assert_eq!(binary_user.status, 401);
}

/// Counts the handler's runs; its `String` body extractor answers 400 when
/// the body is not UTF-8, so a 429 for such a body proves it was never read.
#[rate_limit(rules = [(1, 60s)], by = global)]
async fn counted(State(runs): State<Arc<AtomicUsize>>, body: String) -> String {
    runs.fetch_add(1, Ordering::SeqCst);
    body
}

#[tokio::test]
async fn a_denied_request_never_runs_the_handler_nor_reads_the_body() {
    let runs = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .route("/counted", post(counted))
        .with_state(Arc::clone(&runs))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let addr = serve(router).await;
    let first = send(addr, "POST", "/counted", &[], b"first").await.unwrap();
    assert_eq!(first.status, 200);
    // Were this body read, the extractor would answer 400.
    let denied = send(addr, "POST", "/counted", &[], b"\xff\xfe not text")
        .await
        .unwrap();
    assert_eq!(denied.status, 429);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
