//! Live overrides in process, on the memory store and its clock moved by
//! hand: other rules decide (and name the 429), shadow mode never denies,
//! off checks nothing, and the compiled limit is back the microsecond the
//! override ends; the admin routes refuse what the attribute refuses.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::routing::post;
use http_body_util::BodyExt;
use limiter_tower::{
    Control, KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Override,
    Policy, Rule,
};
use tower::ServiceExt;

fn per_minute(limit: u64) -> Policy {
    Policy::sliding_log([Rule::new(limit, Duration::from_secs(60)).unwrap()]).unwrap()
}

struct App {
    router: Router,
    control: Control,
    clock: ManualClock,
}

fn app() -> App {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let posts = LimitLayer::new("posts-create", per_minute(5), KeySource::user());
    let layer =
        LimiterLayer::new(Limiter::new(MemoryStore::with_clock(clock.clone()))).user(|parts| {
            parts
                .headers
                .get("x-user")?
                .to_str()
                .ok()
                .map(str::to_owned)
        });
    let control = layer.control().limit("POST /posts", &posts);
    let router = Router::new()
        .route("/posts", post(|| async { "posted" }).layer(posts))
        .nest("/admin", control.router())
        .layer(layer);
    App {
        router,
        control,
        clock,
    }
}

impl App {
    async fn post(&self, user: &str) -> Response {
        let request = Request::post("/posts")
            .header("x-user", user)
            .body(Body::empty())
            .unwrap();
        self.router.clone().oneshot(request).await.unwrap()
    }

    /// The statuses of `n` posts by `user`.
    async fn posts(&self, user: &str, n: usize) -> Vec<u16> {
        let mut statuses = Vec::new();
        for _ in 0..n {
            statuses.push(self.post(user).await.status().as_u16());
        }
        statuses
    }

    async fn admin(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response.headers()[name].to_str().unwrap()
}

#[tokio::test]
async fn tighter_rules_decide_and_name_the_429_until_they_end() {
    let app = app();
    assert_eq!(app.posts("ada", 1).await, [200]);
    let hour = Duration::from_secs(3600);
    (app.control)
        .set_override("posts-create", Override::rules(per_minute(2)), hour)
        .await
        .unwrap();
    // The request counted before the override counts against it.
    assert_eq!(app.posts("ada", 1).await, [200]);
    let denied = app.post("ada").await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&denied, "ratelimit-policy"),
        "\"2-per-60s\";q=2;w=60"
    );
    assert_eq!(app.control.overrides()[0].seconds, 3600);

    // One microsecond before its end it holds; at its end the compiled
    // limit (5 a minute) is back, with the 2 requests counted.
    app.clock.advance(hour - Duration::from_micros(1));
    assert_eq!(app.posts("bob", 3).await, [200, 200, 429]);
    assert_eq!(app.control.overrides()[0].seconds, 1);
    app.clock.advance(Duration::from_micros(1));
    assert!(app.control.overrides().is_empty());
    assert_eq!(app.posts("bob", 4).await, [200, 200, 200, 429]);
}

#[tokio::test]
async fn shadow_mode_denies_nothing_and_off_checks_nothing() {
    let app = app();
    let minute = Duration::from_secs(60);
    let control = &app.control;
    control
        .set_override(
            "posts-create",
            Override::rules(per_minute(1)).in_shadow(),
            minute,
        )
        .await
        .unwrap();
    assert_eq!(app.posts("ada", 3).await, [200, 200, 200]);
    control
        .set_override("posts-create", Override::off(), minute)
        .await
        .unwrap();
    assert_eq!(app.posts("ada", 8).await, [200; 8]);
    control.clear_override("posts-create").await.unwrap();
    // Shadow mode recorded the one request its rule allowed (a denial is
    // not recorded, enforced or not); off recorded none.
    assert_eq!(app.posts("ada", 5).await, [200, 200, 200, 200, 429]);
}

#[tokio::test]
async fn the_admin_routes_set_list_and_end_overrides() {
    let app = app();
    let body = r#"{"rules": [[1, "60s"]], "seconds": 600}"#;
    assert_eq!(
        app.admin("PUT", "/admin/overrides/posts-create", body)
            .await
            .0,
        204
    );
    let (status, listed) = app.admin("GET", "/admin/overrides", "").await;
    assert_eq!(status, 200);
    assert_eq!(
        listed,
        r#"[{"limit":"posts-create","mode":"enforce","algorithm":"sliding_log","rules":["1-per-60s"],"seconds":600}]"#
    );
    assert_eq!(app.posts("ada", 2).await, [200, 429]);
    assert_eq!(
        app.admin("DELETE", "/admin/overrides/posts-create", "")
            .await
            .0,
        204
    );
    assert_eq!(
        app.admin("GET", "/admin/overrides/posts-create", "")
            .await
            .0,
        404
    );
    assert_eq!(app.posts("ada", 1).await, [200]);
}

#[tokio::test]
async fn the_admin_routes_refuse_what_the_attribute_refuses() {
    let app = app();
    let refused = [
        (
            r#"{"rules": [[2, "0s"]], "seconds": 60}"#,
            "the window of a rule must be at least 1 µs, got 0ns (limit 2).",
        ),
        (
            r#"{"rules": [[2, "60x"]], "seconds": 60}"#,
            "unknown unit `x` in `60x`: expected ms, s, m, h or d.",
        ),
        (
            r#"{"rules": [[2, "60"]], "seconds": 60}"#,
            "the window of a rule needs a unit (ms, s, m, h or d), like `60s`.",
        ),
        (
            r#"{"rules": [[0, "60s"]], "seconds": 60}"#,
            "the limit of a rule must be at least 1, got 0 (window 60s).",
        ),
        (
            r#"{"algorithm": "gcra", "rate": [10, "1s"], "burst": 5, "seconds": 60}"#,
            "an override of \"posts-create\" must run sliding_log, as the limit does (its keys' \
             state is kept for it), not gcra.",
        ),
        (
            r#"{"rules": [[2, "60s"]], "seconds": 604801}"#,
            "invalid override: an override lasts 1 s to a week (604800 s), got 604801 s.",
        ),
        (
            r#"{"rules": [[2, "60s"]], "seconds": 0}"#,
            "invalid override: an override lasts 1 s to a week (604800 s), got 0 s.",
        ),
        (
            r#"{"rules": [[2, "60s"]], "mode": "loud", "seconds": 60}"#,
            "invalid override: the mode is enforce, shadow or off, got \"loud\".",
        ),
        (
            r#"{"seconds": 60}"#,
            "invalid override: an enforced override gives the rules that replace the limit's.",
        ),
        (
            r#"{"rules": [[1, "60s"]], "mode": "off", "seconds": 60}"#,
            "invalid override: a limit switched off takes no rules.",
        ),
    ];
    for (body, detail) in refused {
        let (status, answer) = app
            .admin("PUT", "/admin/overrides/posts-create", body)
            .await;
        assert_eq!(status, 400, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["detail"], detail, "{body}");
    }
    let (status, _) = app
        .admin(
            "PUT",
            "/admin/overrides/nope",
            r#"{"mode": "off", "seconds": 60}"#,
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = app.admin("PUT", "/admin/overrides/posts-create", "{").await;
    assert_eq!(status, 400);
    // Nothing was changed by a refusal.
    assert_eq!(app.admin("GET", "/admin/overrides", "").await.1, "[]");
    assert_eq!(app.posts("ada", 6).await, [200, 200, 200, 200, 200, 429]);
}
