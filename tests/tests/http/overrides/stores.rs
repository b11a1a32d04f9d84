//! Overrides at the store level: two stores on one Redis Cluster or
//! Sentinel deployment each answer the other's change once its call
//! returned; the memory store ends an override exactly at its end.

use std::time::{Duration, Instant};

use limiter_core::{
    ConfigError, Error, Key, ManualClock, MemoryStore, Override, OverrideMode, Policy, Rule, Store,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::control::ControlCalls;
use limiter_tests::{RedisCluster, RedisSentinel, until};

use super::common::{POSTS, T0};

fn per_minute(limit: u64) -> Policy {
    Policy::sliding_log([Rule::new(limit, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// `a`'s changes seen by `b` and `b`'s by `a`, once `b` is subscribed.
async fn shared(a: &RedisStore, b: &RedisStore) {
    // `b` subscribes at its first call; it then learns of an override by
    // its notice, or by reading them all as it subscribes.
    assert!(
        b.check(&Key::from("warm-up"), &per_minute(1), 1)
            .await
            .unwrap()
            .allowed()
    );
    let hour = Duration::from_secs(3600);
    a.set_override(POSTS, &Override::rules(per_minute(1)), hour)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.override_of(POSTS).is_none() {
        assert!(Instant::now() < deadline, "b never learned of the override");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Subscribed: each change is the other store's once the call returned.
    let tighter = Override::rules(per_minute(2));
    let ten_minutes = Duration::from_secs(600);
    a.set_override(POSTS, &tighter, ten_minutes).await.unwrap();
    let (value, left) = b.override_of(POSTS).expect("the new override on b");
    assert_eq!(*value, tighter);
    assert!(
        left <= ten_minutes && left > ten_minutes - Duration::from_secs(10),
        "{left:?}"
    );
    let listed = b.overrides();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].limit.as_str(), &*listed[0].value),
        (POSTS, &tighter)
    );

    b.set_override(POSTS, &Override::off(), Duration::from_secs(60))
        .await
        .unwrap();
    let (value, _) = a.override_of(POSTS).expect("b's override on a");
    assert_eq!(value.mode(), OverrideMode::Off);
    assert_eq!(value.policy(), None);

    a.clear_override(POSTS).await.unwrap();
    assert_eq!(b.override_of(POSTS), None);
    assert_eq!(a.override_of(POSTS), None);
    assert!(b.overrides().is_empty());
    // Clearing none is no error.
    b.clear_override(POSTS).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_a_cluster_share_their_overrides() {
    let cluster = RedisCluster::start();
    let a = cluster.store().await;
    let b = cluster.store().await;
    shared(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_a_sentinel_deployment_share_their_overrides() {
    let deployment = RedisSentinel::start(1);
    let urls = deployment.sentinel_urls();
    let connect = || async {
        let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
        RedisStore::connect_sentinel(
            urls.iter().map(String::as_str),
            RedisSentinel::SERVICE,
            config,
        )
        .await
        .unwrap()
    };
    let a = connect().await;
    let b = connect().await;
    shared(&a, &b).await;
}

#[tokio::test]
async fn the_memory_store_ends_an_override_exactly_at_its_end() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::with_clock(clock.clone());
    let tighter = Override::rules(per_minute(1));
    store
        .set_override(POSTS, &tighter, Duration::from_secs(2))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(2) - Duration::from_micros(1));
    let (value, left) = store.override_of(POSTS).expect("held 1 µs before its end");
    assert_eq!((&*value, left), (&tighter, Duration::from_micros(1)));
    assert_eq!(store.overrides().len(), 1);
    clock.advance(Duration::from_micros(1));
    assert_eq!(store.override_of(POSTS), None);
    assert!(store.overrides().is_empty());

    // 1 s to a week.
    for seconds in [0, 604_801] {
        let refused = store
            .set_override(POSTS, &tighter, Duration::from_secs(seconds))
            .await
            .unwrap_err();
        let Error::Config(ConfigError::InvalidOverride { reason }) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(
            reason,
            format!("an override lasts 1 s to a week (604800 s), got {seconds} s")
        );
    }
    assert!(store.overrides().is_empty());
}

/// An override lives on the primary and its replica: after Sentinel
/// promotes the replica, an instance that starts reads it from the new
/// primary, and an override ended through the new primary ends within 2 s
/// on every instance, those made before the failover and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_survives_a_sentinel_failover() {
    let deployment = RedisSentinel::start(1);
    let old = &deployment.nodes[0];
    let urls = deployment.sentinel_urls();
    let service = RedisSentinel::SERVICE;
    let config = || RedisConfig::new().response_timeout(Duration::from_secs(2));
    let connect =
        || RedisStore::connect_sentinel(urls.iter().map(String::as_str), service, config());
    let a = connect().await.unwrap();
    let b = connect().await.unwrap();
    let hour = Duration::from_secs(3600);
    a.set_override(POSTS, &Override::off(), hour).await.unwrap();
    assert!(b.synced(Duration::from_secs(10)).await);
    assert!(b.override_of(POSTS).is_some());
    assert_eq!(old.command(&["WAIT", "1", "5000"]).trim(), "1");

    deployment.sentinels[0].command(&["SENTINEL", "FAILOVER", service]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployment.named_primary() != Some(1) {
        assert!(Instant::now() < deadline, "no failover within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = connect().await.unwrap();
    assert!(c.synced(Duration::from_secs(10)).await);
    let (value, left) = c
        .override_of(POSTS)
        .expect("the override, read from the new primary");
    assert_eq!((*value).clone(), Override::off());
    assert!(
        left <= hour && left > hour - Duration::from_secs(30),
        "{left:?}"
    );

    // Ended through the first store once it follows the new primary (it
    // has checked a key there).
    let new = &deployment.nodes[1];
    while new.command_calls("evalsha").succeeded() == 0 {
        let _ = a.check(&Key::from("follow"), &per_minute(1000), 1).await;
        assert!(
            Instant::now() < deadline,
            "the first store never reached the new primary"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ended = loop {
        match a.clear_override(POSTS).await {
            Ok(()) => break Instant::now(),
            Err(error) => {
                assert!(Instant::now() < deadline, "no clear within 20 s: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(a.override_of(POSTS), None);
    // Each store's subscription follows the primary the Sentinels name
    // (a store made before the failover hears its announcement, one made
    // after asks): the change made through the new primary reaches the
    // other store within 2 s, long before the old primary is demoted.
    let took = until(
        ended,
        Duration::from_secs(2),
        Duration::from_millis(20),
        || "b or c kept the ended override for 2 s".into(),
        async || b.override_of(POSTS).is_none() && c.override_of(POSTS).is_none(),
    )
    .await;
    println!("ended on the other store {took:?} after the call");
    assert_eq!(
        new.command(&["HLEN", "{limiter:resets}:overrides"]).trim(),
        "0"
    );
}
