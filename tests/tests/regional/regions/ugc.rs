//! The UGC server's `GET /api/search`: 30 a second per API key, one quota
//! across two regions (two `ugc` processes, each on its own Redis).

use std::time::Duration;

use limiter_tests::http::status_of;
use limiter_tests::regions::in_one_second;
use limiter_tests::{RedisServer, UgcServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ugc_api_search_shares_thirty_a_second_across_regions() {
    let (north_redis, south_redis) = (RedisServer::start(), RedisServer::start());
    let region = |name: &str, own: &RedisServer, peer: &str, other: &RedisServer| {
        let peers = format!("{peer}={}", other.url());
        UgcServer::start(&[
            ("REDIS_URL", own.url().as_str()),
            ("LIMITER_REGION", name),
            ("LIMITER_PEER_REGIONS", peers.as_str()),
        ])
    };
    let north = region("north", &north_redis, "south", &south_redis);
    let south = region("south", &south_redis, "north", &north_redis);
    let search = |addr, key: &'static str| async move {
        status_of(addr, "GET", "/api/search", &[("x-api-key", key.as_bytes())]).await
    };
    assert_eq!(search(north.addr(), "").await, 401, "no key, no quota");
    let statuses = in_one_second(async |key| {
        let mut statuses = Vec::new();
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            statuses.push(search(north.addr(), key).await);
        }
        // North goes quiet: what it holds beyond its count is spare.
        tokio::time::sleep(Duration::from_millis(150)).await;
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            statuses.push(search(south.addr(), key).await);
        }
        statuses
    })
    .await;
    let (north_statuses, south_statuses) = statuses.split_at(20);
    // North's 20: its share (15), then south's, which it asked for
    // halfway through its own and got (south was idle).
    assert_eq!(north_statuses, [200; 20]);
    // South gave its share away: its first request is denied and asks;
    // north, quiet, gives what it does not need (10), and 10 pass.
    assert_eq!(south_statuses[0], 429, "{south_statuses:?}");
    assert_eq!(south_statuses[1..11], [200; 10], "{south_statuses:?}");
    assert_eq!(south_statuses[11..], [429; 4], "{south_statuses:?}");
}

#[tokio::test]
async fn ugc_refuses_peer_regions_without_its_own() {
    let redis = RedisServer::start();
    let ugc = limiter_tests::ugc_binary();
    let output = std::process::Command::new(ugc)
        .env("REDIS_URL", redis.url())
        .env("LIMITER_ADDR", "127.0.0.1:0")
        .env("LIMITER_PEER_REGIONS", "south=redis://127.0.0.1:1/")
        .env_remove("LIMITER_REGION")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let log = String::from_utf8_lossy(&output.stdout);
    assert!(
        log.contains("LIMITER_PEER_REGIONS needs LIMITER_REGION"),
        "{log}"
    );
}
