//! A flood of distinct keys must not reset anyone's limits: the UGC server on
//! a memory store with room for 64 keys (and one shard, so every key competes
//! for the same room), 1,000 other users or client IPs each sending one
//! request; the victim, evicted by them, is still limited exactly as before.

use std::net::SocketAddr;
use std::time::Duration;

use limiter_examples::{Options, app};
use limiter_tests::http::{Response, send, serve};
use limiter_tests::ugc::{assert_post_denied, assert_the_feed_refills_in_600_ms};
use limiter_tower::{Limiter, ManualClock, MemoryStore};

const T0: Duration = Duration::from_secs(1_750_000_000);
const CAPACITY: usize = 64;
const FLOOD: usize = 1_000;

/// The server behind a trusted proxy on 127.0.0.1, so each request names
/// its client in `x-forwarded-for`.
async fn small_server() -> (SocketAddr, ManualClock) {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::with_clock_and_shards(clock.clone(), 1).with_capacity(CAPACITY);
    let options = Options {
        trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        ..Options::default()
    };
    (serve(app(Limiter::new(store), options)).await, clock)
}

async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    send(addr, method, path, &headers, b"{}").await.unwrap()
}

async fn reply(addr: SocketAddr, user: &str) -> Response {
    request(addr, "POST", "/posts/7/replies", &[("x-user-id", user)]).await
}

async fn feed(addr: SocketAddr, client: &str) -> Response {
    request(addr, "GET", "/feed", &[("x-forwarded-for", client)]).await
}

async fn post(addr: SocketAddr, client: &str) -> Response {
    request(addr, "POST", "/posts", &[("x-forwarded-for", client)]).await
}

/// A client address per flood request: 10.0.x.y.
fn flood_client(i: usize) -> String {
    format!("10.0.{}.{}", i / 250, i % 250 + 1)
}

#[tokio::test]
async fn replies_used_up_stay_used_up_after_a_flood_of_other_users() {
    let (addr, clock) = small_server().await;
    for i in 0..5 {
        if i > 0 {
            clock.advance(Duration::from_secs(1));
        }
        assert_eq!(reply(addr, "laoqian").await.status, 201);
    }
    for i in 0..FLOOD {
        reply(addr, &format!("flood{i}")).await;
    }
    // At T0 + 20 s: the first reply, at T0, leaves the window at T0 + 60 s,
    // the last, at T0 + 4 s, at T0 + 64 s.
    clock.advance(Duration::from_secs(16));
    let denied = reply(addr, "laoqian").await;
    denied.assert_denied("40", &[("5-per-60s", 5, 60, 0, 40)]);
    clock.advance(Duration::from_secs(40));
    assert_eq!(reply(addr, "laoqian").await.status, 201);
    let denied = reply(addr, "laoqian").await;
    denied.assert_denied("1", &[("5-per-60s", 5, 60, 0, 1)]);
}

#[tokio::test]
async fn a_used_up_feed_burst_stays_used_up_after_a_flood_of_other_clients() {
    let (addr, clock) = small_server().await;
    for _ in 0..20 {
        assert_eq!(feed(addr, "203.0.113.7").await.status, 200);
    }
    for i in 0..FLOOD {
        feed(addr, &flood_client(i)).await;
    }
    assert_the_feed_refills_in_600_ms(&clock, async || feed(addr, "203.0.113.7").await).await;
}

#[tokio::test]
async fn a_duplicate_post_stays_denied_after_a_flood_of_other_clients() {
    let (addr, clock) = small_server().await;
    assert_eq!(post(addr, "203.0.113.7").await.status, 201);
    for i in 0..FLOOD {
        post(addr, &flood_client(i)).await;
    }
    // 3.5 s after the first post, under "1 per 5 s": 1.5 s to wait.
    clock.advance(Duration::from_millis(3_500));
    let denied = post(addr, "203.0.113.7").await;
    assert_post_denied(&denied, "2", [(9, 57), (19, 117), (0, 2)]);
    clock.advance(Duration::from_millis(1_500));
    assert_eq!(post(addr, "203.0.113.7").await.status, 201);
}
