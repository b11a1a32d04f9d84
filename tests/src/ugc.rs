//! The UGC example server in process, as the end-to-end tests run it: on
//! the memory store with time moved by hand, or on Redis; its admin token,
//! and requests to its routes.

use std::net::SocketAddr;
use std::time::Duration;

use limiter_examples::admin::AdminToken;
use limiter_examples::{Options, app};
use limiter_tower::{GuardConfig, Limiter, ManualClock, MemoryStore};

use crate::TestRedis;
use crate::http::{Response, send, serve};

/// Where the tests' manual clocks start.
pub const T0: Duration = Duration::from_secs(1_750_000_000);
/// The admin routes' token.
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// The server's options under test: the admin routes on, and a store
/// deadline generous for a loaded test machine.
pub fn options() -> Options {
    Options {
        admin_token: Some(AdminToken::new(ADMIN_TOKEN).unwrap()),
        guard: GuardConfig {
            deadline: Duration::from_secs(5),
            ..GuardConfig::default()
        },
        // Instances in one test see each other's top offenders at once.
        publish_offenders_every: Some(Duration::from_millis(100)),
        ..Options::default()
    }
}

/// A UGC server on the memory store, its time moved by `clock`.
pub async fn memory_server_with(clock: ManualClock) -> SocketAddr {
    serve(app(Limiter::new(MemoryStore::with_clock(clock)), options())).await
}

/// A UGC server on the memory store, and its clock (starting at [`T0`]).
pub async fn memory_server() -> (SocketAddr, ManualClock) {
    let clock = ManualClock::new(T0);
    (memory_server_with(clock.clone()).await, clock)
}

/// A UGC server on `redis`, under the test's prefix.
pub async fn redis_server(redis: &TestRedis) -> SocketAddr {
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    serve(app(limiter, options())).await
}

/// `POST /posts/1/replies` as `user`.
pub async fn reply(addr: SocketAddr, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    send(addr, "POST", "/posts/1/replies", &headers, b"")
        .await
        .unwrap()
}

/// `POST /posts/1/likes` as `user`.
pub async fn like(addr: SocketAddr, user: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    send(addr, "POST", "/posts/1/likes", &headers, b"")
        .await
        .unwrap()
}

/// Two posts at once: the first is created, the second refused by the
/// duplicate rule, with every rule's fields.
pub async fn assert_a_second_post_is_a_duplicate(addr: SocketAddr) {
    let first = send(addr, "POST", "/posts", &[], b"").await.unwrap();
    assert_eq!(first.status, 201, "{first:#?}");
    let duplicate = send(addr, "POST", "/posts", &[], b"").await.unwrap();
    assert_post_denied(&duplicate, "5", [(9, 60), (19, 120), (0, 5)]);
}

/// A post refused, to retry after `retry_after` seconds, with each of the
/// posts' rules (10 per 60 s, 20 per 120 s, 1 per 5 s) at its
/// `(remaining, reset)`.
pub fn assert_post_denied(response: &Response, retry_after: &str, rules: [(i64, i64); 3]) {
    let [(r1, t1), (r2, t2), (r3, t3)] = rules;
    response.assert_denied(
        retry_after,
        &[
            ("10-per-60s", 10, 60, r1, t1),
            ("20-per-120s", 20, 120, r2, t2),
            ("1-per-5s", 1, 5, r3, t3),
        ],
    );
}

/// A client whose feed burst is spent (`feed` sends its next request):
/// denied with the feed's fields, still denied 599 ms later, allowed at
/// 600 ms, when GCRA's 100 a minute lets one more through.
pub async fn assert_the_feed_refills_in_600_ms(
    clock: &ManualClock,
    mut feed: impl AsyncFnMut() -> Response,
) {
    let denied = feed().await;
    denied.assert_denied("1", &[("100-per-60s-burst-20", 20, 12, 0, 1)]);
    clock.advance(Duration::from_millis(599));
    assert_eq!(feed().await.status, 429);
    clock.advance(Duration::from_millis(1));
    assert_eq!(feed().await.status, 200);
}
