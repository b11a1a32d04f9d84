//! Limits that follow the business, in process on the memory store with a
//! manual clock: plans, allow lists, shadow mode and costs (waiting and
//! concurrency: `business_waiting.rs`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use limiter_tower::{KeySource, LimitLayer, Plan, Plans, Policy, Rule};
use tower::ServiceExt;

use crate::common;
use common::app;

fn per_minute(limit: u64) -> Policy {
    Policy::sliding_log([Rule::new(limit, Duration::from_secs(60)).unwrap()]).unwrap()
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response.headers()[name].to_str().unwrap()
}

#[tokio::test]
async fn a_request_is_held_to_its_plan_and_a_lowered_plan_counts_what_passed() {
    let plans = Plans::new([
        Plan::new("free", per_minute(2)).unwrap(),
        Plan::new("pro", per_minute(5)).unwrap(),
        Plan::unlimited("internal").unwrap(),
    ])
    .unwrap();
    plans.fits(&per_minute(2)).unwrap();
    let table = plans.clone();
    let limit = LimitLayer::new(
        "search",
        per_minute(2),
        KeySource::header("x-api-key".parse().unwrap()),
    )
    .plans(move |parts| {
        let key = parts.headers.get("x-api-key")?.to_str().ok()?;
        table.get(key.split('-').next()?)
    });
    let app = app(limit, |l| l);
    for remaining in (0..5).rev() {
        let ok = app.send("203.0.113.7", &[("x-api-key", "pro-1")]).await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(
            header(&ok, "ratelimit-policy"),
            "\"pro:5-per-60s\";q=5;w=60"
        );
        assert_eq!(
            header(&ok, "ratelimit"),
            format!("\"pro:5-per-60s\";r={remaining};t=60")
        );
    }
    let denied = app.send("203.0.113.7", &[("x-api-key", "pro-1")]).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&denied, "ratelimit"), "\"pro:5-per-60s\";r=0;t=60");
    // Pro raised to 7: two more pass; lowered to 3: the 7 counted deny.
    plans
        .insert(Plan::new("pro", per_minute(7)).unwrap())
        .unwrap();
    for _ in 0..2 {
        let ok = app.send("203.0.113.7", &[("x-api-key", "pro-1")]).await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
    plans
        .insert(Plan::new("pro", per_minute(3)).unwrap())
        .unwrap();
    app.clock.advance(Duration::from_secs(59));
    let denied = app.send("203.0.113.7", &[("x-api-key", "pro-1")]).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&denied, "ratelimit-policy"),
        "\"pro:3-per-60s\";q=3;w=60"
    );
    // A key without a known plan gets the limit's own policy.
    for _ in 0..2 {
        let ok = app.send("203.0.113.7", &[("x-api-key", "nobody")]).await;
        assert_eq!(header(&ok, "ratelimit-policy"), "\"2-per-60s\";q=2;w=60");
    }
    let denied = app.send("203.0.113.7", &[("x-api-key", "nobody")]).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // An unlimited plan is not checked and carries no fields.
    for _ in 0..20 {
        let ok = app
            .send("203.0.113.7", &[("x-api-key", "internal-1")])
            .await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert!(ok.headers().get("ratelimit").is_none());
    }
    assert_eq!(app.runs.load(Ordering::SeqCst), 5 + 2 + 2 + 20);
}

#[tokio::test]
async fn allow_lists_bypass_by_the_resolved_client_and_by_identity() {
    let limit = LimitLayer::new("r", per_minute(1), KeySource::ip());
    let app = app(limit, |l| {
        l.allow_ips(["192.0.2.0/24".parse().unwrap()])
            .allow_identities(["198.51.100.9"])
    });
    for _ in 0..5 {
        // From the allowed network itself, and forwarded by a trusted proxy.
        let direct = app.send("192.0.2.1", &[]).await;
        assert_eq!(direct.status(), StatusCode::OK);
        assert!(direct.headers().get("ratelimit").is_none());
        let proxied = app
            .send("10.0.0.1", &[("x-forwarded-for", "192.0.2.77")])
            .await;
        assert_eq!(proxied.status(), StatusCode::OK);
        // By identity: `by = ip`'s identity is the address.
        assert_eq!(app.send("198.51.100.9", &[]).await.status(), StatusCode::OK);
    }
    // A client that forges the header is not behind a trusted proxy: its
    // own address counts, and it is not on the list.
    let spoofed = [("x-forwarded-for", "192.0.2.1")];
    assert_eq!(
        app.send("203.0.113.7", &spoofed).await.status(),
        StatusCode::OK
    );
    let denied = app.send("203.0.113.7", &spoofed).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // Behind a trusted proxy, a forged entry left of the real client buys nothing.
    let forged = [("x-forwarded-for", "192.0.2.1, 203.0.113.8")];
    assert_eq!(app.send("10.0.0.1", &forged).await.status(), StatusCode::OK);
    assert_eq!(
        app.send("10.0.0.1", &forged).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_limits_own_allow_list_bypasses_only_that_limit() {
    let limit = LimitLayer::new(
        "r",
        per_minute(1),
        KeySource::header("x-api-key".parse().unwrap()),
    )
    .allow_identities(["partner"]);
    let app = app(limit, |l| l);
    for _ in 0..3 {
        let ok = app.send("203.0.113.7", &[("x-api-key", "partner")]).await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
    assert_eq!(
        app.send("203.0.113.7", &[("x-api-key", "other")])
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.send("203.0.113.7", &[("x-api-key", "other")])
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn shadow_mode_lets_every_request_through_with_the_fields_of_its_decision() {
    let limit = LimitLayer::new("r", per_minute(2), KeySource::ip()).shadow(true);
    let app = app(limit, |l| l);
    for remaining in [1, 0, 0, 0] {
        let response = app.send("203.0.113.7", &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, "ratelimit"),
            format!("\"2-per-60s\";r={remaining};t=60")
        );
    }
    assert_eq!(app.runs.load(Ordering::SeqCst), 4);
    // Layer-wide shadow mode covers limits without their own.
    let app = self::app(LimitLayer::new("r", per_minute(1), KeySource::ip()), |l| {
        l.shadow(true)
    });
    for _ in 0..3 {
        assert_eq!(app.send("203.0.113.7", &[]).await.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn a_cost_from_the_request_is_charged_and_an_impossible_one_refused() {
    let policy = per_minute(10);
    let limit = LimitLayer::new("r", policy, KeySource::ip()).cost(|parts| {
        let size = parts.headers.get("x-batch").and_then(|v| v.to_str().ok());
        size.and_then(|n| n.parse().ok()).unwrap_or(1)
    });
    let app = app(limit, |l| l);
    let batch = app.send("203.0.113.7", &[("x-batch", "7")]).await;
    assert_eq!(header(&batch, "ratelimit"), "\"10-per-60s\";r=3;t=60");
    let free = app.send("203.0.113.7", &[("x-batch", "0")]).await;
    assert_eq!(free.status(), StatusCode::OK);
    assert!(free.headers().get("ratelimit").is_none());
    let too_big = app.send("203.0.113.7", &[("x-batch", "11")]).await;
    assert_eq!(too_big.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(too_big.headers().get("retry-after").is_none());
    let over = app.send("203.0.113.7", &[("x-batch", "4")]).await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    let fits = app.send("203.0.113.7", &[("x-batch", "3")]).await;
    assert_eq!(header(&fits, "ratelimit"), "\"10-per-60s\";r=0;t=60");
}

#[tokio::test]
async fn an_allowed_network_needs_no_identity_and_a_spoofed_one_gets_none() {
    let limit = LimitLayer::new(
        "r",
        per_minute(1),
        KeySource::header("x-api-key".parse().unwrap()),
    )
    .allow_ips(["192.0.2.0/24".parse().unwrap()]);
    let app = app(limit, |l| l);
    // No API key, but from the allowed network: not held.
    assert_eq!(app.send("192.0.2.1", &[]).await.status(), StatusCode::OK);
    // No API key from elsewhere: refused as usual, whatever it claims.
    let claims = [("x-forwarded-for", "192.0.2.1"), ("x-real-ip", "192.0.2.1")];
    assert_eq!(
        app.send("203.0.113.7", &claims).await.status(),
        StatusCode::UNAUTHORIZED
    );
    // A request without its peer address is on no list.
    let mut no_peer = Request::get("/r").body(Body::empty()).unwrap();
    no_peer
        .headers_mut()
        .insert("x-api-key", "k".parse().unwrap());
    assert_eq!(
        app.router.clone().oneshot(no_peer).await.unwrap().status(),
        StatusCode::OK
    );
    let mut no_peer = Request::get("/r").body(Body::empty()).unwrap();
    no_peer
        .headers_mut()
        .insert("x-api-key", "k".parse().unwrap());
    let denied = app.router.clone().oneshot(no_peer).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_plan_of_another_algorithm_is_not_applied() {
    let bucket = Policy::gcra(limiter_tower::Rate::per_second(100).unwrap(), 100).unwrap();
    let other = Plan::new("bucket", bucket).unwrap();
    let limit =
        LimitLayer::new("r", per_minute(1), KeySource::ip()).plans(move |_| Some(other.clone()));
    let app = app(limit, |l| l);
    let ok = app.send("203.0.113.7", &[]).await;
    assert_eq!(header(&ok, "ratelimit-policy"), "\"1-per-60s\";q=1;w=60");
    let denied = app.send("203.0.113.7", &[]).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
}
