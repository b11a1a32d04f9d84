//! Live overrides end to end: set over the admin routes of one UGC
//! instance, they decide the requests of every instance sharing its Redis
//! (one started afterwards too) until they are cleared or end, or Redis
//! restarts empty; refused with the attribute's own messages, changing
//! nothing; shadow and off modes, and their metrics. At the store level:
//! two stores on one Redis Cluster or Sentinel deployment, and the memory
//! store ending an override exactly when its clock passes the end.

#[path = "overrides/common.rs"]
pub(crate) mod common;
#[path = "overrides/stores.rs"]
mod stores;

use std::time::{Duration, Instant};

use common::*;
use limiter_examples::app;
use limiter_tests::http::send;
use limiter_tests::http::serve;
use limiter_tests::{RedisServer, UgcServer, sample};
use limiter_tower::{Limiter, ManualClock, RedisConfig, RedisStore};
use serde_json::{Value, json};

/// An enforced override of the posts limit: 1 per 60 s, for an hour.
const ONE_PER_MINUTE: &str = r#"{"rules": [[1, "60s"]], "seconds": 3600}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_set_on_one_instance_decides_on_another_until_deleted_there() {
    let redis = RedisServer::start();
    let [a, b] = subscribed_instances(&redis).await;
    assert_compiled(b, 1).await;

    put_override(a, POSTS_OVERRIDE, ONE_PER_MINUTE).await;
    // B decides by it at once: a fresh client gets 1, and the client that
    // posted before is over it already (its post is still counted).
    assert_overridden(b, 2).await;
    let counted = post(b, 1).await;
    assert_denied_by(&counted, &[("1-per-60s", 1, 60)]);
    assert_overridden(a, 3).await;

    let listed = overrides(b).await;
    let seconds = listed[0]["seconds"].as_u64().unwrap();
    assert!((3599..=3600).contains(&seconds), "{listed}");
    let expected = override_state("enforce", Some("sliding_log"), &["1-per-60s"], seconds);
    assert_eq!(listed, json!([expected]));
    let one = admin(b, "GET", POSTS_OVERRIDE, "", Some(TOKEN)).await;
    assert_eq!(one.status, 200, "{one:#?}");
    let one: Value = serde_json::from_str(&one.body).unwrap();
    assert_eq!(one["limit"], POSTS);
    assert_eq!(one["rules"], json!(["1-per-60s"]));

    let cleared = admin(b, "DELETE", POSTS_OVERRIDE, "", Some(TOKEN)).await;
    assert_eq!((cleared.status, cleared.body.as_str()), (204, ""));
    assert_compiled(a, 4).await;
    assert_compiled(b, 5).await;
    for instance in [a, b] {
        assert_eq!(overrides(instance).await, json!([]));
        let none = admin(instance, "GET", POSTS_OVERRIDE, "", Some(TOKEN)).await;
        assert_eq!(
            problem(&none, 404),
            "No override holds on this limit: its compiled rules do."
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_override_ends_by_itself_on_every_instance() {
    let redis = RedisServer::start();
    let [a, b] = subscribed_instances(&redis).await;
    // Long enough that a loaded machine still checks B under it.
    let body = r#"{"rules": [[1, "60s"]], "seconds": 5}"#;
    let asked = Instant::now();
    put_override(a, POSTS_OVERRIDE, body).await;
    assert_overridden(b, 1).await;

    for instance in [a, b] {
        let ended = poll_overrides(instance, Duration::from_secs(10), |listed| {
            listed == &json!([])
        })
        .await;
        assert_eq!(ended, json!([]));
    }
    // Not before its end: each instance ends it 5 s after it learned of
    // it, which was after the PUT was sent (by the system clock, which
    // the override tables read: a few ms of leeway against `Instant`).
    let ended_after = asked.elapsed();
    assert!(
        ended_after >= Duration::from_millis(4_990),
        "ended {ended_after:?} after the PUT"
    );
    assert_compiled(a, 2).await;
    assert_compiled(b, 3).await;
}

/// Over HTTP on the memory store, time moved by hand: the override holds
/// 1 µs before its end, and the compiled limit is back at its end.
#[tokio::test]
async fn on_the_memory_store_an_override_ends_exactly_at_its_end() {
    let clock = ManualClock::new(T0);
    let addr = memory_instance_with(clock.clone()).await;
    let body = r#"{"rules": [[1, "60s"]], "seconds": 2}"#;
    put_override(addr, POSTS_OVERRIDE, body).await;
    let state = |seconds| override_state("enforce", Some("sliding_log"), &["1-per-60s"], seconds);
    assert_eq!(overrides(addr).await, json!([state(2)]));
    clock.advance(Duration::from_secs(2) - Duration::from_micros(1));
    // 1 µs left, rounded up.
    assert_eq!(overrides(addr).await, json!([state(1)]));
    assert_overridden(addr, 1).await;
    clock.advance(Duration::from_micros(1));
    assert_eq!(overrides(addr).await, json!([]));
    assert_compiled(addr, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_overrides_say_why_and_change_nothing() {
    let redis = RedisServer::start();
    let [a, b] = subscribed_instances(&redis).await;
    // Every refusal's message is checked in process
    // (`limiter-tower/tests/layers/overrides.rs`); here one of the compiler's and
    // one of the override's own, through the UGC server's admin routes.
    let refusals: [(&str, &str); 2] = [
        (
            r#"{"rules": [[2, "0s"]], "seconds": 60}"#,
            "the window of a rule must be at least 1 µs, got 0ns (limit 2).",
        ),
        (
            r#"{"seconds": 60}"#,
            "invalid override: an enforced override gives the rules that replace the limit's.",
        ),
    ];
    for (body, detail) in refusals {
        let refused = admin(a, "PUT", POSTS_OVERRIDE, body, Some(TOKEN)).await;
        assert_eq!(problem(&refused, 400), detail, "{body}");
    }

    let unknown = admin(
        a,
        "PUT",
        "/admin/overrides/nope",
        ONE_PER_MINUTE,
        Some(TOKEN),
    )
    .await;
    assert_eq!(
        problem(&unknown, 404),
        "No limit is named \"nope\" here (its name as its keys end, as `/me/limits` shows it)."
    );
    for method in ["PUT", "DELETE", "GET"] {
        let anonymous = admin(a, method, POSTS_OVERRIDE, ONE_PER_MINUTE, None).await;
        assert_eq!(anonymous.status, 401, "{method}: {anonymous:#?}");
        assert_eq!(
            anonymous.header("www-authenticate"),
            r#"Bearer realm="admin""#
        );
        assert_eq!(
            serde_json::from_str::<Value>(&anonymous.body).unwrap(),
            json!({"error": "admin routes need the header Authorization: Bearer <token>"})
        );
    }
    let anonymous = admin(a, "GET", "/admin/overrides", "", None).await;
    assert_eq!(anonymous.status, 401);

    for instance in [a, b] {
        assert_eq!(overrides(instance).await, json!([]));
    }
    assert_eq!(redis.command(&["HLEN", OVERRIDES_HASH]).trim(), "0");
    assert_compiled(a, 1).await;
    assert_compiled(b, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_after_the_override_decides_by_it_once_subscribed() {
    let redis = RedisServer::start();
    let [a] = subscribed_instances(&redis).await;
    put_override(a, POSTS_OVERRIDE, ONE_PER_MINUTE).await;

    let c = redis_instance(&redis).await;
    // Its first request to a limited route starts its subscription, which
    // reads the overrides whole.
    subscribed(&redis, &[a, c]).await;
    let listed = poll_overrides(c, Duration::from_secs(5), |listed| listed != &json!([])).await;
    let seconds = listed[0]["seconds"].as_u64().unwrap();
    assert!((3590..=3600).contains(&seconds), "{listed}");
    assert_eq!(
        listed,
        json!([override_state(
            "enforce",
            Some("sliding_log"),
            &["1-per-60s"],
            seconds
        )])
    );
    assert_overridden(c, 1).await;
}

/// A store that waited for its subscription's first reading before its
/// instance serves (as the UGC server does when it starts) decides that
/// instance's very first request by the override.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_synced_before_serving_decides_its_first_request_by_the_override() {
    let redis = RedisServer::start();
    let [a] = subscribed_instances(&redis).await;
    put_override(a, POSTS_OVERRIDE, ONE_PER_MINUTE).await;

    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&redis.url(), config)
        .await
        .unwrap();
    assert!(store.synced(Duration::from_secs(5)).await);
    let c = serve(app(Limiter::new(store), options())).await;
    let first = post(c, 1).await;
    assert_eq!(
        (first.status, first.header("ratelimit-policy")),
        (201, "\"1-per-60s\";q=1;w=60"),
        "{first:#?}"
    );
    assert_denied_by(&post(c, 1).await, &[("1-per-60s", 1, 60)]);
}

/// Redis restarted empty (no persistence) holds no override: each
/// instance reads that when it subscribes again, and the compiled limit
/// is back everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restarted_empty_brings_the_compiled_limit_back_everywhere() {
    let mut redis = RedisServer::start();
    let [a, b] = subscribed_instances(&redis).await;
    put_override(a, POSTS_OVERRIDE, ONE_PER_MINUTE).await;
    assert_overridden(b, 1).await;

    redis.restart();
    for instance in [a, b] {
        let ended = poll_overrides(instance, Duration::from_secs(15), |listed| {
            listed == &json!([])
        })
        .await;
        assert_eq!(ended, json!([]));
    }
    subscribed(&redis, &[a, b]).await;
    assert_compiled(a, 2).await;
    assert_compiled(b, 3).await;
}

/// A bucket's override takes a rate and a burst, as the attribute writes
/// them: set on one instance, it decides the likes of the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_override_takes_a_rate_and_a_burst() {
    let redis = RedisServer::start();
    let [a, b] = subscribed_instances(&redis).await;
    let path = "/admin/overrides/posts-like";
    let body = r#"{"rate": [1, "60s"], "burst": 2, "seconds": 3600}"#;
    put_override(a, path, body).await;
    let listed = overrides(b).await;
    assert_eq!(listed[0]["algorithm"], "token_bucket");
    assert_eq!(listed[0]["rules"], json!(["1-per-60s-burst-2"]));
    for i in 0..2 {
        let liked = like(b, "xiaoming").await;
        assert_eq!(liked.status, 200, "like {i}: {liked:#?}");
    }
    // A bucket of 2, refilled 1 a minute: its window is 120 s.
    assert_denied_by(&like(b, "xiaoming").await, &[("1-per-60s-burst-2", 2, 120)]);
    let refused = admin(
        a,
        "PUT",
        path,
        r#"{"rate": [1, "60s"], "seconds": 60}"#,
        Some(TOKEN),
    )
    .await;
    assert_eq!(
        problem(&refused, 400),
        "invalid override: token_bucket needs a size: `burst` or `capacity`."
    );
}

/// Rules for a bucket, or a rate for a sliding log, are refused saying
/// what the limit's algorithm takes.
#[tokio::test]
async fn rules_of_the_wrong_kind_are_refused_saying_what_the_limit_takes() {
    let addr = memory_instance().await;
    let refused = [
        (
            "/admin/overrides/posts-like",
            r#"{"rules": [[1, "60s"]], "seconds": 60}"#,
            "token_bucket takes a rate and a size, not rules.",
        ),
        (
            POSTS_OVERRIDE,
            r#"{"rate": [10, "1s"], "burst": 20, "seconds": 60}"#,
            "sliding_log takes rules, not a rate and a size.",
        ),
        (
            POSTS_OVERRIDE,
            r#"{"rules": [[1, "60s"]], "mode": "off", "seconds": 60}"#,
            "invalid override: a limit switched off takes no rules.",
        ),
    ];
    for (path, body, detail) in refused {
        let response = admin(addr, "PUT", path, body, Some(TOKEN)).await;
        assert_eq!(problem(&response, 400), detail, "{body}");
    }
    assert_eq!(overrides(addr).await, json!([]));
}

/// An override that loosens a limit admits a client the compiled limit
/// denied a moment before, on the instance that denied it: the override's
/// rules decide, not the denial this instance remembers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looser_override_admits_a_client_the_compiled_limit_denied() {
    let redis = RedisServer::start();
    let [a] = subscribed_instances(&redis).await;
    // A duplicate: denied for 5 s by the compiled limit.
    assert_compiled(a, 1).await;
    let looser = r#"{"rules": [[10, "60s"]], "seconds": 3600}"#;
    put_override(a, POSTS_OVERRIDE, looser).await;
    // One post counted of 10 per 60 s: the second is allowed.
    let second = post(a, 1).await;
    assert_eq!(second.status, 201, "{second:#?}");
}

/// Once an override that tightened a limit is deleted, a client it denied
/// is decided by the compiled limit again, on the instance that denied it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_denied_by_a_deleted_override_is_decided_by_the_compiled_limit() {
    let redis = RedisServer::start();
    let [a] = subscribed_instances(&redis).await;
    let path = "/admin/overrides/posts-create_reply";
    put_override(a, path, ONE_PER_MINUTE).await;
    assert_eq!(reply(a, "laoqian").await.status, 201);
    assert_denied_by(&reply(a, "laoqian").await, &[("1-per-60s", 1, 60)]);
    let cleared = admin(a, "DELETE", path, "", Some(TOKEN)).await;
    assert_eq!(cleared.status, 204, "{cleared:#?}");
    // One reply counted of 5 per 60 s.
    let again = reply(a, "laoqian").await;
    assert_eq!(again.status, 201, "{again:#?}");
}

/// Shadow never answers 429 and counts what it would have denied; off
/// checks nothing; both counted apart in `/metrics`, on the UGC server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_never_denies_and_off_never_checks() {
    let redis = RedisServer::start();
    let ugc = ugc_server(&redis);
    let addr = ugc.addr();
    // Over its compiled limit: the duplicate rule denies a second post.
    assert_compiled(addr, 1).await;

    let shadow = r#"{"mode": "shadow", "seconds": 60}"#;
    put_override(addr, POSTS_OVERRIDE, shadow).await;
    let listed = overrides(addr).await;
    let seconds = listed[0]["seconds"].as_u64().unwrap();
    assert!((59..=60).contains(&seconds), "{listed}");
    assert_eq!(
        listed,
        json!([override_state("shadow", None, &[], seconds)])
    );
    // A fresh client: its first post allowed, the next two duplicates.
    for i in 0..3 {
        let shadowed = post(addr, 4).await;
        assert_eq!(shadowed.status, 201, "post {i}: {shadowed:#?}");
    }
    let metrics = metrics(addr).await;
    let shadow_denied = |metrics: &str| {
        sample(
            metrics,
            &[
                "limiter_shadow_denied_total{",
                &format!("limit=\"{POSTS}\""),
            ],
        )
    };
    assert_eq!(shadow_denied(&metrics), 2.0);
    assert_eq!(decisions(&metrics, "allowed", "store", true), 1.0);
    assert_eq!(denials(&metrics, true), 2.0);

    // Shadow with rules of its own: tried, never denying.
    let trial = r#"{"rules": [[1, "60s"]], "mode": "shadow", "seconds": 60}"#;
    put_override(addr, POSTS_OVERRIDE, trial).await;
    let listed = overrides(addr).await;
    assert_eq!(listed[0]["mode"], "shadow");
    assert_eq!(listed[0]["rules"], json!(["1-per-60s"]));
    for i in 0..2 {
        let tried = post(addr, 2).await;
        assert_eq!(tried.status, 201, "post {i}: {tried:#?}");
    }
    assert_eq!(shadow_denied(&self::metrics(addr).await), 3.0);

    // Off: not even the denial client 1 earned before (remembered in the
    // deny cache) answers.
    let off = r#"{"mode": "off", "seconds": 60}"#;
    put_override(addr, POSTS_OVERRIDE, off).await;
    assert_eq!(overrides(addr).await[0]["mode"], "off");
    for i in 0..5 {
        let unchecked = post(addr, 1).await;
        assert_eq!(unchecked.status, 201, "post {i}: {unchecked:#?}");
        assert!(
            !unchecked.headers.contains_key("ratelimit"),
            "{unchecked:#?}"
        );
    }
    let metrics = self::metrics(addr).await;
    assert_eq!(decisions(&metrics, "bypassed", "override_off", true), 5.0);
    assert_eq!(shadow_denied(&metrics), 3.0);

    assert_eq!(
        admin(addr, "DELETE", POSTS_OVERRIDE, "", Some(TOKEN))
            .await
            .status,
        204
    );
    assert_compiled(addr, 3).await;
}

/// A denial under an override is counted with `override="true"`, apart
/// from the compiled limit's decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_under_an_override_are_counted_apart() {
    let redis = RedisServer::start();
    let ugc = ugc_server(&redis);
    let addr = ugc.addr();
    assert_eq!(post(addr, 1).await.status, 201);
    put_override(addr, POSTS_OVERRIDE, ONE_PER_MINUTE).await;
    assert_overridden(addr, 2).await;
    let metrics = metrics(addr).await;
    assert_eq!(decisions(&metrics, "allowed", "store", false), 1.0);
    assert_eq!(decisions(&metrics, "allowed", "store", true), 1.0);
    assert_eq!(decisions(&metrics, "denied", "store", true), 1.0);
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("limiter_decisions_total{")
                && l.contains("outcome=\"denied\"")
                && l.contains("override=\"false\"")
                && l.contains(&format!("limit=\"{POSTS}\""))),
        "{metrics}"
    );
}

/// The UGC server on `redis`, with the admin routes.
fn ugc_server(redis: &RedisServer) -> UgcServer {
    UgcServer::start(&[
        ("REDIS_URL", &redis.url()),
        ("LIMITER_STORE_DEADLINE_MS", "5000"),
        ("LIMITER_ADMIN_TOKEN", TOKEN),
    ])
}

async fn metrics(addr: std::net::SocketAddr) -> String {
    let response = send(addr, "GET", "/metrics", &[], b"").await.unwrap();
    assert_eq!(response.status, 200);
    response.body
}

/// The posts limit's `limiter_decisions_total` of `outcome` and `source`,
/// under an override or not.
fn decisions(metrics: &str, outcome: &str, source: &str, overridden: bool) -> f64 {
    sample(
        metrics,
        &[
            "limiter_decisions_total{",
            &format!("outcome=\"{outcome}\""),
            &format!("source=\"{source}\""),
            &format!("limit=\"{POSTS}\""),
            &format!("override=\"{overridden}\""),
        ],
    )
}

/// The posts limit's denials, whatever denied them (the store or the
/// deny cache), under an override or not.
fn denials(metrics: &str, overridden: bool) -> f64 {
    let limit = format!("limit=\"{POSTS}\"");
    let overridden = format!("override=\"{overridden}\"");
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("limiter_decisions_total{")
                && l.contains("outcome=\"denied\"")
                && l.contains(&limit)
                && l.contains(&overridden)
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}
