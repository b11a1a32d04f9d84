//! An admin change answered with an error lands on every instance or on
//! none (issue 31): two guarded stores on one Redis stand for two
//! instances. Redis hangs (SIGSTOP) while instance A blocks a key, assigns
//! a plan and resets a key whose denial B has cached: each call answers
//! `Error::Unconfirmed`. When Redis resumes (SIGCONT) the calls it had
//! read run late; within 2 s both instances answer the key blocked, the
//! plan assigned and the reset key allowed, as Redis then holds, and an
//! instance started afterwards agrees. When Redis is killed and restarted
//! instead, the calls never run, and every instance agrees on "not
//! blocked". On a Redis Cluster, the changes are counted in the notices'
//! slot and a change no notice announced is read by every instance.

use std::time::{Duration, Instant};

use limiter_core::{
    Error, Forget, GuardConfig, Guarded, Key, KeyState, OnStoreError, Policy, Rule, SharedControl,
    Store, Verdict,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::control::ControlCalls;
use limiter_tests::eventually::{assert_found_within, first_true, warmed};
use limiter_tests::{RedisCluster, RedisServer};

/// The store's deadline: what an admin change answers within while Redis
/// hangs.
const DEADLINE: Duration = Duration::from_millis(150);
/// The promise: in effect on every instance or on none within 2 s of Redis
/// answering again.
const BOUND: Duration = Duration::from_secs(2);

const BLOCKED: &str = "test:mallory";
const PLANNED: &str = "test:key-123";
const RESET: &str = "test:carol:login";

fn once_a_minute() -> Policy {
    Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// One instance's store: its own connections to Redis.
async fn instance(url: &str) -> RedisStore {
    let config = RedisConfig::new().response_timeout(DEADLINE);
    RedisStore::connect_with(url, config).await.unwrap()
}

/// An instance as the layer runs it: guarded, with a deny cache.
fn guarded(store: RedisStore) -> Guarded<RedisStore> {
    let config = GuardConfig {
        deadline: DEADLINE,
        ..GuardConfig::default()
    };
    Guarded::new(store, config)
}

/// Loads every admin script on Redis (a script Redis lacks answers
/// NOSCRIPT, which runs nothing: there would be no late write to see),
/// and waits for both instances' subscriptions.
async fn warm_up(a: &RedisStore, b: &RedisStore) {
    for (from, to, key) in [(a, b, "test:warm-a"), (b, a, "test:warm-b")] {
        from.operator_block(key, Duration::from_secs(60))
            .await
            .unwrap();
        warmed(&format!("the other reads {key}"), async || {
            to.blocked(key).is_some()
        })
        .await;
    }
    a.unblock("test:warm-a").await.unwrap();
    a.unblock("test:warm-b").await.unwrap();
    a.assign_plan("test:warm", Some("pro")).await.unwrap();
    a.assign_plan("test:warm", None).await.unwrap();
    a.reset(&Key::from("test:warm"), &once_a_minute())
        .await
        .unwrap();
}

/// B's check of [`RESET`]: `true` when allowed.
async fn allowed_on(b: &Guarded<RedisStore>) -> bool {
    let verdict = b
        .check_with(
            &Key::from(RESET),
            &once_a_minute(),
            1,
            OnStoreError::FailClosed,
        )
        .await
        .unwrap();
    verdict.allowed()
}

/// While Redis hangs, A's three changes (made at once, so all three go
/// out on the live connection) answer `Unconfirmed`, the cause the
/// deadline, and A applies none of them itself.
async fn change_while_hung(a: &Guarded<RedisStore>) {
    let (policy, reset_key) = (once_a_minute(), Key::from(RESET));
    let (block, plan, reset) = tokio::join!(
        a.operator_block(BLOCKED, Duration::from_secs(600)),
        a.assign_plan(PLANNED, Some("pro")),
        a.reset(&reset_key, &policy),
    );
    for answer in [&block, &plan, &reset] {
        assert!(
            matches!(answer, Err(Error::Unconfirmed(cause)) if matches!(**cause, Error::Timeout(DEADLINE))),
            "{answer:?}"
        );
    }
    assert_eq!(a.blocked(BLOCKED), None);
    assert_eq!(a.store().assigned_plan(PLANNED), None);
}

/// A, B's deny cache holding a denial of [`RESET`].
async fn with_cached_denial(url: &str) -> (Guarded<RedisStore>, Guarded<RedisStore>) {
    let a = guarded(instance(url).await);
    let b = guarded(instance(url).await);
    warm_up(a.store(), b.store()).await;
    assert!(
        a.check(&Key::from(RESET), &once_a_minute(), 1)
            .await
            .unwrap()
            .allowed()
    );
    assert!(!allowed_on(&b).await);
    let cached = b
        .check_with(
            &Key::from(RESET),
            &once_a_minute(),
            1,
            OnStoreError::FailClosed,
        )
        .await
        .unwrap();
    assert!(matches!(cached, Verdict::Cached(_)), "{cached:?}");
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_that_run_late_reach_every_instance_within_two_seconds() {
    let server = RedisServer::start();
    let url = server.url();
    let (a, b) = with_cached_denial(&url).await;

    server.signal("STOP");
    change_while_hung(&a).await;
    server.signal("CONT");
    let resumed = Instant::now();

    // What Redis holds once it has run what it had read (a new
    // connection's command comes after those).
    let redis = |args: &[&str]| server.command(args).trim().to_owned();
    let blocked = redis(&["HEXISTS", "{limiter:resets}:blocks", BLOCKED]) == "1";
    let plan = redis(&["HGET", "{limiter:resets}:plans", PLANNED]);
    let plan = (!plan.is_empty()).then(|| std::sync::Arc::<str>::from(plan));
    let reset = redis(&["EXISTS", RESET]) == "0";
    println!("ran late: the block {blocked}, the plan {plan:?}, the reset {reset}");
    assert!(blocked && plan.as_deref() == Some("pro") && reset);

    let agree = async |store: &RedisStore| {
        store.blocked(BLOCKED).is_some() == blocked && store.assigned_plan(PLANNED) == plan
    };
    let agreed = first_true(resumed, BOUND, async || {
        agree(a.store()).await && agree(b.store()).await && allowed_on(&b).await == reset
    })
    .await;
    println!("A and B agree with Redis {agreed:?} after it resumed");
    assert_found_within(agreed, BOUND);

    // An instance started now reads the same state.
    let c = instance(&url).await;
    c.on_reset(Box::new(|_| true));
    let agrees = first_true(Instant::now(), BOUND, async || agree(&c).await).await;
    assert!(agrees.is_some(), "C does not agree");
    assert!(agree(a.store()).await && agree(b.store()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_that_never_run_take_effect_nowhere() {
    let mut server = RedisServer::start();
    let url = server.url();
    let (a, b) = with_cached_denial(&url).await;
    let forgotten = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&forgotten);
    b.store().on_reset(Box::new(move |forget| {
        sink.lock().unwrap().push(forget.clone());
        true
    }));

    server.signal("STOP");
    change_while_hung(&a).await;
    // The calls Redis had read die with it: the restarted server is empty.
    server.restart();
    let restarted = Instant::now();

    // B subscribes again and forgets everything (it may have missed
    // notices); Redis holds no request of the reset key.
    let resubscribed = first_true(restarted, BOUND, async || {
        forgotten.lock().unwrap().contains(&Forget::Everything)
    })
    .await;
    assert!(resubscribed.is_some(), "B did not subscribe again");
    let c = instance(&url).await;
    c.on_reset(Box::new(|_| true));
    // C has read the blocks once it sees one made after it started.
    b.store()
        .operator_block("test:after", Duration::from_secs(60))
        .await
        .unwrap();
    warmed("C reads B's block", async || {
        c.blocked("test:after").is_some()
    })
    .await;
    for store in [a.store(), b.store(), &c] {
        assert_eq!(store.blocked(BLOCKED), None);
        assert_eq!(store.assigned_plan(PLANNED), None);
    }
    assert!(allowed_on(&b).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_an_unannounced_change_is_read_by_every_instance() {
    let cluster = RedisCluster::start();
    let (a, b) = (cluster.store().await, cluster.store().await);
    let forgotten = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&forgotten);
    b.on_reset(Box::new(move |forget| {
        sink.lock().unwrap().push(forget.clone());
        true
    }));
    warm_up(&a, &b).await;
    let version = "{limiter:resets}:version";
    let node = &cluster.nodes[cluster.owner_of(version)];
    let redis = |args: &[&str]| node.command(args).trim().to_owned();
    // The warm-up's two blocks, two unblocks and two plans, counted by
    // their scripts; its reset answered, so not counted.
    assert_eq!(redis(&["HGET", version, "changes"]), "6");
    assert_eq!(redis(&["HGET", version, "resets"]), "");

    // A plan written and counted with no notice, as a late write is.
    redis(&["HSET", "{limiter:resets}:plans", PLANNED, "pro"]);
    redis(&["HINCRBY", version, "changes", "1"]);
    let written = Instant::now();
    let pro = Some("pro".into());
    let read = first_true(written, BOUND, async || {
        a.assigned_plan(PLANNED) == pro && b.assigned_plan(PLANNED) == pro
    })
    .await;
    assert_found_within(read, BOUND);

    // A failed reset, counted: every instance forgets everything.
    redis(&["HINCRBY", version, "resets", "1"]);
    let counted = Instant::now();
    let forgot = first_true(counted, BOUND, async || {
        forgotten.lock().unwrap().contains(&Forget::Everything)
    })
    .await;
    assert_found_within(forgot, BOUND);
}
