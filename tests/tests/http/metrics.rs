//! The UGC server's `/metrics`: the documented names, with exact counts.

use limiter_tests::http::send;
use limiter_tests::{RedisServer, UgcServer, sample};

async fn replies(app: &UgcServer, user: &str, count: usize) {
    let headers: &[(&str, &[u8])] = &[("x-user-id", user.as_bytes())];
    for _ in 0..count {
        send(app.addr(), "POST", "/posts/1/replies", headers, b"")
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn decisions_store_calls_and_the_deny_cache_are_counted() {
    let redis = RedisServer::start();
    // Top offenders not published: every store call counted is a check's.
    let app = UgcServer::start(&[
        ("REDIS_URL", &redis.url()),
        ("LIMITER_STORE_DEADLINE_MS", "5000"),
        ("LIMITER_OFFENDERS_EVERY_MS", "0"),
    ]);
    replies(&app, "laoqian", 20).await;
    let metrics = send(app.addr(), "GET", "/metrics", &[], b"")
        .await
        .unwrap()
        .body;
    let decisions = |outcome: &str, source: &str| {
        sample(
            &metrics,
            &[
                "limiter_decisions_total{",
                &format!("outcome=\"{outcome}\""),
                &format!("source=\"{source}\""),
                "limit=\"posts-create_reply\"",
                "algorithm=\"sliding_log\"",
            ],
        )
    };
    // Replies block a user after 3 denials: the first by Redis, the next
    // two by the deny cache, then 12 blocked without a store call.
    assert_eq!(decisions("allowed", "store"), 5.0);
    assert_eq!(decisions("denied", "store"), 1.0);
    assert_eq!(decisions("denied", "deny_cache"), 2.0);
    assert_eq!(decisions("denied", "blocked"), 12.0);
    assert_eq!(sample(&metrics, &["limiter_deny_cache_hits_total"]), 2.0);
    // 6 checks, 3 denials counted by the penalty, 1 block.
    assert_eq!(
        sample(&metrics, &["limiter_store_call_seconds_count"]),
        10.0
    );
    // A histogram with buckets, as the dashboard's quantiles read it.
    assert_eq!(
        sample(
            &metrics,
            &["limiter_store_call_seconds_bucket", "le=\"+Inf\""]
        ),
        10.0
    );
    assert_eq!(sample(&metrics, &["limiter_breaker_state"]), 0.0);
}

#[tokio::test]
async fn store_errors_fallbacks_and_the_breaker_are_reported() {
    let dead = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    let app = UgcServer::start(&[("REDIS_URL", &dead)]);
    replies(&app, "laoqian", 8).await;
    let metrics = send(app.addr(), "GET", "/metrics", &[], b"")
        .await
        .unwrap()
        .body;
    // Three failures open the breaker; the other calls skip the store.
    assert_eq!(
        sample(&metrics, &["limiter_store_errors_total{", "kind=\"redis\""]),
        3.0
    );
    assert_eq!(sample(&metrics, &["limiter_breaker_state"]), 1.0);
    assert_eq!(
        sample(
            &metrics,
            &["limiter_fallback_decisions_total{", "policy=\"fallback\""]
        ),
        8.0
    );
    let fallback = |outcome: &str| {
        sample(
            &metrics,
            &[
                "limiter_decisions_total{",
                &format!("outcome=\"{outcome}\""),
                "source=\"fallback\"",
            ],
        )
    };
    assert_eq!((fallback("allowed"), fallback("denied")), (5.0, 3.0));
    // The fallback limiter holds the one key.
    assert_eq!(sample(&metrics, &["limiter_memory_store_keys"]), 1.0);
}
