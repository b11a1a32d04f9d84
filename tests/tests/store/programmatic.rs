//! The programmatic API on both stores: the reply scenario, multi-rule
//! boundaries, GCRA against redis-cell's documented answers, invalid input.

use std::time::Duration;

use limiter_core::{
    ConfigError, Decision, Error, Limiter, ManualClock, MemoryStore, Policy, Rate, Rule,
};
use limiter_redis::RedisConfig;
use limiter_tests::{TimedStore, redis};
use redis::AsyncCommands;

const SECOND: u64 = 1_000_000;
const T0: u64 = 1_750_000_000 * SECOND;

async fn is_allowed_20_times<S: limiter_core::Store>(
    limiter: &Limiter<S>,
    user: &str,
) -> Vec<bool> {
    let mut answers = Vec::new();
    for _ in 0..20 {
        answers.push(
            limiter
                .is_action_allowed(user, "reply", Duration::from_secs(60), 5)
                .await
                .unwrap(),
        );
    }
    answers
}

fn five_then_fifteen() -> Vec<bool> {
    [vec![true; 5], vec![false; 15]].concat()
}

#[tokio::test]
async fn laoqian_replies_five_times_a_minute_in_memory() {
    let clock = ManualClock::new(Duration::from_micros(T0));
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    for user in ["laoqian", "xiaoming"] {
        assert_eq!(
            is_allowed_20_times(&limiter, user).await,
            five_then_fifteen(),
            "{user}"
        );
    }
    clock.advance(Duration::from_secs(60) - Duration::from_micros(1));
    assert!(
        !limiter
            .is_action_allowed("laoqian", "reply", Duration::from_secs(60), 5)
            .await
            .unwrap()
    );
    clock.advance(Duration::from_micros(1));
    assert_eq!(
        is_allowed_20_times(&limiter, "laoqian").await,
        five_then_fifteen()
    );
}

#[tokio::test]
async fn laoqian_replies_five_times_a_minute_on_redis() {
    let redis = redis();
    let store = redis.store().await;
    let limiter = Limiter::new(store.clone()).with_prefix(redis.prefix());
    for user in ["laoqian", "xiaoming"] {
        assert_eq!(
            is_allowed_20_times(&limiter, user).await,
            five_then_fifteen(),
            "{user}"
        );
    }

    // The key has the documented shape and expires after the window.
    let key = format!("{}:user=laoqian:reply", redis.prefix());
    let mut raw = redis.raw().await;
    let members: u64 = raw.zcard(&key).await.unwrap();
    assert_eq!(members, 5 + 1, "five entries and the newest-entry marker");
    let ttl: i64 = raw.pttl(&key).await.unwrap();
    assert!(
        (59_000..=60_000).contains(&ttl),
        "TTL {ttl} ms is the 60 s window, less the test's own run time"
    );

    // A minute later by Redis's clock (given explicitly: the test does not sleep).
    let server_now = redis_time(&mut raw).await;
    let policy = Policy::sliding_log([Rule::new(5, Duration::from_secs(60)).unwrap()]).unwrap();
    let clocked = limiter_tests::at::At::redis(redis.url(), RedisConfig::new()).await;
    let later = clocked
        .check_at(&key, &policy, 1, server_now + 60 * SECOND)
        .await
        .unwrap();
    assert!(later.allowed());
    assert_eq!(later.remaining(), 4);
}

async fn redis_time(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(raw).await.unwrap();
    secs * SECOND + micros
}

fn posts_policy() -> Policy {
    Policy::sliding_log([
        Rule::new(10, Duration::from_secs(60)).unwrap(),
        Rule::new(20, Duration::from_secs(120)).unwrap(),
    ])
    .unwrap()
}

async fn both_stores(redis: &limiter_tests::TestRedis) -> [TimedStore; 2] {
    [TimedStore::memory(), TimedStore::redis(redis).await]
}

#[tokio::test]
async fn two_rules_decide_at_their_exact_boundaries() {
    let redis = redis();
    for store in both_stores(&redis).await {
        let key = redis.key(&format!("{}:posts", store.name()));
        let check = |at: u64| {
            let (store, key) = (store.clone(), key.clone());
            async move { store.check_at(&key, &posts_policy(), 1, at).await.unwrap() }
        };
        // 10 at T0: the 60 s rule is full.
        for i in 0..10 {
            let d = check(T0).await;
            assert!(d.allowed(), "{}: request {i}", store.name());
        }
        let d = check(T0 + 30 * SECOND).await;
        assert!(!d.allowed());
        assert_eq!(d.rule().to_string(), "10-per-60s", "{}", store.name());
        assert_eq!(d.retry_after(), Some(Duration::from_secs(30)));
        assert_eq!((d.limit(), d.remaining()), (10, 0));
        assert_eq!(d.rules()[1].remaining(), 10);

        // One microsecond before the entries are a window old they still count;
        // exactly a window old they do not.
        let d = check(T0 + 60 * SECOND - 1).await;
        assert_eq!(d.retry_after(), Some(Duration::from_micros(1)));
        for i in 0..10 {
            let d = check(T0 + 60 * SECOND).await;
            assert!(
                d.allowed(),
                "{}: request {i} of the second minute",
                store.name()
            );
        }
        // Now the 120 s rule is full too. Both free when the T0 entries leave
        // (a 60 s window never holds more than 10, so the 60 s rule frees no
        // earlier than the 120 s one); ties go to the first rule.
        let d = check(T0 + 61 * SECOND).await;
        assert!(!d.allowed());
        assert_eq!(d.rule().to_string(), "10-per-60s", "{}", store.name());
        assert_eq!(d.retry_after(), Some(Duration::from_secs(59)));
        assert_eq!((d.rules()[0].remaining(), d.rules()[1].remaining()), (0, 0));
        assert_eq!(d.reset_after(), Duration::from_secs(119));
        // At T0 + 120 s both windows have dropped the T0 entries.
        let d = check(T0 + 120 * SECOND).await;
        assert!(d.allowed(), "{}", store.name());
        assert_eq!((d.rules()[0].remaining(), d.rules()[1].remaining()), (9, 9));
        assert_eq!(d.rule_index(), 0);
    }
}

#[tokio::test]
async fn the_rule_that_frees_last_decides() {
    let policy = Policy::sliding_log([
        Rule::new(3, Duration::from_secs(1)).unwrap(),
        Rule::new(5, Duration::from_secs(60)).unwrap(),
    ])
    .unwrap();
    let redis = redis();
    for store in both_stores(&redis).await {
        let key = redis.key(&format!("{}:burst", store.name()));
        let check = |at: u64, cost: u64| {
            let (store, key, policy) = (store.clone(), key.clone(), policy.clone());
            async move { store.check_at(&key, &policy, cost, at).await.unwrap() }
        };
        assert!(check(T0, 3).await.allowed());
        let d = check(T0 + SECOND / 2, 1).await;
        assert_eq!(d.rule().to_string(), "3-per-1s", "{}", store.name());
        assert_eq!(d.retry_after(), Some(Duration::from_millis(500)));
        let d = check(T0 + SECOND, 2).await;
        assert!(d.allowed());
        // Allowed: the 60 s rule has 0 left, the 1 s rule 1: the 60 s rule is tightest.
        assert_eq!((d.rule_index(), d.remaining()), (1, 0), "{}", store.name());
        let d = check(T0 + 2 * SECOND + 1, 1).await;
        assert!(!d.allowed());
        assert_eq!(d.rule().to_string(), "5-per-60s", "{}", store.name());
        assert_eq!(
            d.retry_after(),
            Some(Duration::from_micros(58 * SECOND - 1))
        );
        assert_eq!(d.rules()[0].remaining(), 3);
    }
}

/// What `CL.THROTTLE` answers, read from a decision: allowed, limit,
/// remaining, retry after, reset after.
fn cell_reply(d: &Decision) -> (bool, u64, u64, Option<Duration>, Duration) {
    (
        d.allowed(),
        d.limit(),
        d.remaining(),
        d.retry_after(),
        d.reset_after(),
    )
}

#[tokio::test]
async fn gcra_reproduces_redis_cell() {
    // CL.THROTTLE user123 15 30 60 1  ->  0, 16, 15, -1, 2
    let policy = Policy::gcra(Rate::new(30, Duration::from_secs(60)).unwrap(), 16).unwrap();
    let redis = redis();
    for store in both_stores(&redis).await {
        let key = redis.key(&format!("{}:user123", store.name()));
        let d = store.check_at(&key, &policy, 1, T0).await.unwrap();
        assert_eq!(
            cell_reply(&d),
            (true, 16, 15, None, Duration::from_secs(2)),
            "{}",
            store.name()
        );
        // 15 more pass at once, the 17th waits one emission interval.
        for remaining in (0..15).rev() {
            let d = store.check_at(&key, &policy, 1, T0).await.unwrap();
            assert_eq!((d.allowed(), d.remaining()), (true, remaining));
        }
        let d = store.check_at(&key, &policy, 1, T0).await.unwrap();
        assert_eq!(
            cell_reply(&d),
            (
                false,
                16,
                0,
                Some(Duration::from_secs(2)),
                Duration::from_secs(32)
            ),
            "{}",
            store.name()
        );
        let d = store
            .check_at(&key, &policy, 1, T0 + 2 * SECOND)
            .await
            .unwrap();
        assert_eq!(
            (d.allowed(), d.remaining(), d.reset_after()),
            (true, 0, Duration::from_secs(32))
        );
    }
}

#[tokio::test]
async fn invalid_parameters_are_refused_with_their_value() {
    let limiter = Limiter::new(MemoryStore::new());
    let err = limiter
        .is_action_allowed("laoqian", "reply", Duration::ZERO, 5)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the window of a rule must be at least 1 µs, got 0ns (limit 5)"
    );
    let err = limiter
        .is_action_allowed("laoqian", "reply", Duration::from_secs(60), 0)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config(ConfigError::ZeroLimit { .. })));

    // A cost over the capacity is refused by the stores too, not only by `with_cost`.
    let redis = redis();
    let bucket = Policy::token_bucket(Rate::per_second(1).unwrap(), 10).unwrap();
    for store in both_stores(&redis).await {
        let err = store
            .check_at(&redis.key("k"), &bucket, 11, T0)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "a cost of 11 can never pass: it exceeds the burst capacity of 10",
            "{}",
            store.name()
        );
    }
}

#[tokio::test]
async fn identities_cannot_change_the_key_shape() {
    let redis = redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    limiter
        .is_action_allowed("{evil}:admin", "reply", Duration::from_secs(60), 5)
        .await
        .unwrap();
    let mut raw = redis.raw().await;
    let keys: Vec<String> = raw.keys(format!("{}:*", redis.prefix())).await.unwrap();
    assert_eq!(
        keys,
        [format!("{}:user=%7Bevil%7D%3Aadmin:reply", redis.prefix())]
    );
}

#[tokio::test]
async fn every_key_written_expires_when_its_state_means_nothing() {
    let redis = redis();
    let store = redis.store().await;
    let mut raw = redis.raw().await;
    let minute = Duration::from_secs(60);
    let per_minute = Rate::per_minute(1).unwrap();
    for policy in [
        posts_policy(),
        Policy::fixed_window(Rule::new(5, minute).unwrap()),
        Policy::sliding_window(Rule::new(5, minute).unwrap()),
        Policy::token_bucket(per_minute, 5).unwrap(),
        Policy::leaky_bucket(per_minute, 5).unwrap(),
        Policy::gcra(per_minute, 5).unwrap(),
    ] {
        let key = redis.key(policy.algorithm().name());
        let d = limiter_core::Store::check(&store, &limiter_core::Key::from(&key), &policy, 1)
            .await
            .unwrap();
        let ttl_ms: i64 = raw.pttl(&key).await.unwrap();
        let reset_ms = d.reset_after().as_micros().div_ceil(1000) as i64;
        // The TTL is the reset time, less the few ms this test took since.
        assert!(
            ttl_ms > reset_ms - 1_000 && ttl_ms <= reset_ms,
            "{}: TTL {ttl_ms} ms, reset after {reset_ms} ms",
            policy.algorithm()
        );
    }
}

#[tokio::test]
async fn a_key_reused_with_another_algorithm_starts_afresh_on_both_stores() {
    let redis = redis();
    let minute = Duration::from_secs(60);
    let rate = Rate::per_minute(10).unwrap();
    let policies = [
        posts_policy(),
        Policy::fixed_window(Rule::new(7, minute).unwrap()),
        Policy::sliding_window(Rule::new(7, minute).unwrap()),
        Policy::token_bucket(rate, 7).unwrap(),
        Policy::gcra(rate, 7).unwrap(),
        posts_policy(),
    ];
    let [memory, on_redis] = both_stores(&redis).await;
    let key = redis.key("reused");
    for (i, policy) in policies.iter().enumerate() {
        let at = T0 + i as u64 * SECOND;
        let from_memory = memory.check_at(&key, policy, 1, at).await.unwrap();
        let from_redis = on_redis.check_at(&key, policy, 1, at).await.unwrap();
        assert_eq!(from_redis, from_memory, "{}", policy.algorithm());
        assert!(from_memory.allowed());
        assert_eq!(
            from_memory.remaining(),
            from_memory.limit() - 1,
            "{}: fresh state",
            policy.algorithm()
        );
    }
}

#[tokio::test]
async fn a_clock_that_steps_back_never_admits_more() {
    let redis = redis();
    let one_per_minute =
        Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    let two_per_minute = Policy::sliding_window(Rule::new(2, Duration::from_secs(60)).unwrap());
    for store in both_stores(&redis).await {
        // Recorded at T0 + 1 ms; then a check that read the clock 1 ms earlier.
        let log = redis.key(&format!("{}:log", store.name()));
        assert!(
            store
                .check_at(&log, &one_per_minute, 1, T0 + 1_000)
                .await
                .unwrap()
                .allowed()
        );
        let earlier = store.check_at(&log, &one_per_minute, 1, T0).await.unwrap();
        assert!(
            !earlier.allowed(),
            "{}: the later entry counts",
            store.name()
        );
        assert_eq!(
            earlier.retry_after(),
            Some(Duration::from_micros(60 * SECOND + 1_000))
        );

        // A window that started after the time a late check read.
        let window = redis.key(&format!("{}:window", store.name()));
        let next_window = T0 - T0 % (60 * SECOND) + 60 * SECOND;
        assert!(
            store
                .check_at(&window, &two_per_minute, 2, next_window)
                .await
                .unwrap()
                .allowed()
        );
        let late = store
            .check_at(&window, &two_per_minute, 1, next_window - 1)
            .await
            .unwrap();
        assert!(!late.allowed(), "{}: the later window counts", store.name());
    }
}

#[tokio::test]
async fn requests_sharing_a_microsecond_are_each_recorded() {
    // Many instances can check one key in the same microsecond: every
    // allowed request must still be recorded as its own entries, whatever
    // their costs and order (on Redis, members must not collide).
    let redis = redis();
    let policy = Policy::sliding_log([Rule::new(20, Duration::from_secs(60)).unwrap()]).unwrap();
    let costs = [1, 3, 1, 2, 4, 1, 2, 3, 2, 1];
    for store in both_stores(&redis).await {
        let key = redis.key(&format!("{}:same-microsecond", store.name()));
        let mut recorded = 0;
        for cost in costs {
            let decision = store.check_at(&key, &policy, cost, T0).await.unwrap();
            assert!(decision.allowed(), "{}: cost {cost}", store.name());
            recorded += cost;
            assert_eq!(decision.remaining(), 20 - recorded, "{}", store.name());
        }
        // One microsecond later every entry still counts.
        let next = store.check_at(&key, &policy, 1, T0 + 1).await.unwrap();
        assert!(!next.allowed(), "{}: 20 recorded", store.name());
    }
    // On Redis: entries numbered without a gap (the script relies on it to
    // number the next ones), and the newest-entry marker.
    let key = redis.key("redis:same-microsecond");
    let mut members: Vec<String> = redis.raw().await.zrange(&key, 0, -1).await.unwrap();
    let mut expected: Vec<String> = (0..20).map(|i| format!("{T0}-{i}")).collect();
    expected.push("~".to_owned());
    members.sort();
    expected.sort();
    assert_eq!(members, expected);
}
