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
