//! Instances of two versions on one Redis. A notice this version does not
//! read (a newer version's kind, or one garbled) makes an instance read the
//! blocks, plans and overrides again rather than guess, and acknowledge the
//! notice once it has: a newer writer's change is in force here at once,
//! though nothing here knows its notice.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use limiter_core::{Override, SharedControl};
use limiter_redis::RedisStore;
use limiter_tests::RedisServer;
use limiter_tests::eventually::until;

/// The Redis server's time, in µs.
fn redis_now(redis: &RedisServer) -> u64 {
    let time = redis.command(&["TIME"]);
    let mut parts = time.split_whitespace().map(|p| p.parse::<u64>().unwrap());
    parts.next().unwrap() * 1_000_000 + parts.next().unwrap()
}

#[tokio::test]
async fn a_notice_of_a_newer_version_makes_an_instance_read_everything_again() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let tables = store.tables().clone();
    assert!(store.synced(Duration::from_secs(5)).await);
    // Listens for the acknowledgement.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub.subscribe("limiter:resets").await.unwrap();
    let mut notices = pubsub.into_on_message();

    // A newer writer's changes, in rows this version reads, without the
    // version hash moved (which the version poll would see), each announced
    // by a notice of a kind this version does not know.
    let ends = (redis_now(&redis) + 600_000_000).to_string();
    redis.command(&["HSET", "{limiter:resets}:blocks", "rl:user=mallory", &ends]);
    redis.command(&["HSET", "{limiter:resets}:plans", "rl:key=k-1", "pro"]);
    let text = format!("{ends} {}", Override::off().to_text());
    redis.command(&["HSET", "{limiter:resets}:overrides", "posts", &text]);
    redis.command(&["PUBLISH", "limiter:resets", "z 77 a change of a newer kind"]);
    let published = Instant::now();
    until(
        published,
        Duration::from_secs(2),
        Duration::from_millis(10),
        || "the newer writer's changes were not read".into(),
        async || {
            tables.blocked("rl:user=mallory").is_some()
                && tables.assigned_plan("rl:key=k-1").as_deref() == Some("pro")
                && tables.override_of("posts").is_some()
        },
    )
    .await;
    // Acknowledged, so the newer writer's change is answered.
    let acknowledged = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(message) = notices.next().await {
            if message.get_payload::<String>().unwrap() == "a 77" {
                return;
            }
        }
    })
    .await;
    assert!(acknowledged.is_ok(), "the notice was never acknowledged");

    // An unblock by the newer writer, announced alike, is read too.
    redis.command(&["HDEL", "{limiter:resets}:blocks", "rl:user=mallory"]);
    redis.command(&["PUBLISH", "limiter:resets", "z 78"]);
    until(
        Instant::now(),
        Duration::from_secs(3),
        Duration::from_millis(10),
        || "the newer writer's unblock was not read".into(),
        async || tables.blocked("rl:user=mallory").is_none(),
    )
    .await;
}
