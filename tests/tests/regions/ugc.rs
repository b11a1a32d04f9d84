//! The UGC server's `GET /api/search`: 30 a second per API key, one quota
//! across two regions (two `ugc` processes, each on its own Redis).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use limiter_tests::http::send;
use limiter_tests::{RedisServer, UgcServer};

/// Sleeps until just after the next whole second: the window of a quota
/// per second, by the servers' clock (this machine's).
async fn next_second() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - into + Duration::from_millis(5)).await;
}

fn second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

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
        send(
            addr,
            "GET",
            "/api/search",
            &[("x-api-key", key.as_bytes())],
            b"",
        )
        .await
        .unwrap()
        .status
    };
    assert_eq!(search(north.addr(), "").await, 401, "no key, no quota");
    // A run must fit in one second of the servers' clock; a machine too
    // busy for that tries again with another key.
    for key in ["k1", "k2", "k3"] {
        next_second().await;
        let started = second();
        let mut statuses = Vec::new();
        for _ in 0..20 {
            // Room for the syncs here too: from its first tier (15) on, a
            // region whose sync is pending is held to one step past it.
            tokio::time::sleep(Duration::from_millis(15)).await;
            statuses.push(search(north.addr(), key).await);
        }
        for _ in 0..15 {
            // Room for the background syncs, a loopback round trip each.
            tokio::time::sleep(Duration::from_millis(20)).await;
            statuses.push(search(south.addr(), key).await);
        }
        if second() != started {
            continue;
        }
        let (north_statuses, south_statuses) = statuses.split_at(20);
        assert_eq!(north_statuses, [200; 20]);
        // South knows north's 20 from its first tier on: 10 more, then 429.
        assert_eq!(south_statuses[..10], [200; 10], "{south_statuses:?}");
        assert_eq!(south_statuses[10..], [429; 5], "{south_statuses:?}");
        return;
    }
    panic!("three runs in a row did not fit in one second");
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
