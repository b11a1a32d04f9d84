//! The UGC server's admin routes with `LIMITER_REGION`: three `ugc`
//! processes, one per region, each on its own Redis; whatever an admin
//! route does for `GET /api/search`'s key reaches the regional store.

use std::time::{Duration, Instant};

use limiter_tests::http::{Response, send};
use limiter_tests::regions::in_one_second;
use limiter_tests::{RedisServer, UgcServer};
use serde_json::Value;

const TOKEN: &str = "regional-admin-token";
const REGIONS: [&str; 3] = ["north", "middle", "south"];

/// A `ugc` per region, each told of the others' Redis.
struct Regions {
    redis: Vec<RedisServer>,
    ugc: Vec<UgcServer>,
}

impl Regions {
    fn start() -> Self {
        let redis: Vec<RedisServer> = REGIONS.iter().map(|_| RedisServer::start()).collect();
        let ugc = (0..REGIONS.len())
            .map(|here| {
                let peers: Vec<String> = (0..REGIONS.len())
                    .filter(|&there| there != here)
                    .map(|there| format!("{}={}", REGIONS[there], redis[there].url()))
                    .collect();
                UgcServer::start(&[
                    ("REDIS_URL", redis[here].url().as_str()),
                    ("LIMITER_REGION", REGIONS[here]),
                    ("LIMITER_PEER_REGIONS", peers.join(",").as_str()),
                    ("LIMITER_ADMIN_TOKEN", TOKEN),
                ])
            })
            .collect();
        Self { redis, ugc }
    }

    /// Until each server follows its Redis's notices: the server's store
    /// and its regional store's, two subscriptions per Redis.
    async fn following(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for redis in &self.redis {
            loop {
                let reply = redis.command(&["PUBSUB", "NUMSUB", "limiter:resets"]);
                let subscribed: u64 = reply
                    .lines()
                    .last()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if subscribed >= 2 {
                    break;
                }
                assert!(Instant::now() < deadline, "not subscribed: {reply}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    async fn search(&self, region: usize, key: &str) -> Response {
        let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
        send(self.ugc[region].addr(), "GET", "/api/search", &headers, b"")
            .await
            .unwrap()
    }

    async fn admin(&self, region: usize, method: &str, path: &str, body: &str) -> Response {
        let addr = self.ugc[region].addr();
        limiter_tests::http::admin(addr, None, method, path, body, Some(TOKEN)).await
    }

    /// `GET /api/search`'s state of `key` in `region`, as the admin route
    /// reads it.
    async fn search_state(&self, region: usize, key: &str) -> Value {
        let path = format!("/admin/limits/key/{key}");
        let response = self.admin(region, "GET", &path, "").await;
        assert_eq!(response.status, 200, "{response:#?}");
        let states: Vec<Value> = serde_json::from_str(&response.body).unwrap();
        (states.into_iter())
            .find(|state| state["route"] == "GET /api/search")
            .unwrap_or_else(|| panic!("no GET /api/search in {}", response.body))
    }
}

/// A 429 of a block: `Retry-After` the block's time left, a problem of
/// type blocked.
fn assert_blocked(response: &Response, retry_after: &str) {
    assert_eq!(response.status, 429, "{response:#?}");
    assert_eq!(response.header("retry-after"), retry_after, "{response:#?}");
    let problem: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(problem["type"], limiter_tower::BLOCKED, "{response:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_blocked_on_norths_admin_route_is_blocked_in_every_region() {
    let regions = Regions::start();
    regions.following().await;
    assert_eq!(regions.search(2, "k1").await.status, 200);
    let block = regions
        .admin(0, "PUT", "/admin/blocks/key/k1", r#"{"seconds": 60}"#)
        .await;
    assert_eq!(block.status, 204, "{block:#?}");
    // Answered once every region has it: each answers the block at once.
    for region in [2, 1, 0] {
        assert_blocked(&regions.search(region, "k1").await, "60");
    }
    let blocked = regions.admin(2, "GET", "/admin/blocks/key/k1", "").await;
    assert_eq!(blocked.body, r#"{"seconds":60}"#, "{blocked:#?}");
    assert_eq!(regions.search(2, "k2").await.status, 200, "another key");

    let unblock = regions.admin(0, "DELETE", "/admin/blocks/key/k1", "").await;
    assert_eq!(unblock.status, 204, "{unblock:#?}");
    for region in [2, 1, 0] {
        assert_eq!(regions.search(region, "k1").await.status, 200);
    }
    let blocked = regions.admin(2, "GET", "/admin/blocks/key/k1", "").await;
    assert_eq!(blocked.status, 404, "{blocked:#?}");
}

/// This region's lease, as a check here would answer: the whole quota
/// once the idle regions gave their shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_route_reads_an_api_keys_search_quota_in_its_region() {
    let regions = Regions::start();
    regions.following().await;
    // Five requests and the read must fit in one second of the servers'
    // clock.
    let state = in_one_second(async |key| {
        for _ in 0..5 {
            assert_eq!(regions.search(2, key).await.status, 200);
        }
        // Half its share spent, the region asked the others (idle) for
        // theirs: answered within a loopback round trip or two.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        regions.search_state(2, key).await
    })
    .await;
    assert_eq!(
        (&state["limit"], &state["remaining"]),
        (&30.into(), &25.into())
    );
    assert_eq!(state["allowed"], true, "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_reset_on_souths_admin_route_has_its_quota_again_in_north() {
    let regions = Regions::start();
    regions.following().await;
    let (statuses, after) = in_one_second(async |key| {
        let mut statuses = Vec::new();
        for _ in 0..31 {
            statuses.push(regions.search(0, key).await.status);
        }
        let path = format!("/admin/limits/key/{key}");
        let reset = regions.admin(2, "DELETE", &path, "").await;
        assert_eq!(reset.status, 204, "{reset:#?}");
        (statuses, regions.search(0, key).await.status)
    })
    .await;
    assert_eq!(statuses.last(), Some(&429), "the quota used: {statuses:?}");
    assert_eq!(after, 200, "north after the reset");
}
