//! The layers in process: exact 429s and headers, the handler and the body
//! untouched when denied, missing identities, pacing, the decision.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::routing::post;
use limiter_tower::{
    KeySource, LimitLayer, Limiter, LimiterLayer, ManualClock, MemoryStore, Policy, Rule,
};
use tower::ServiceExt;

use crate::common::user_of;

fn posts_policy() -> Policy {
    Policy::sliding_log([
        Rule::new(2, Duration::from_secs(60)).unwrap(),
        Rule::new(3, Duration::from_secs(120)).unwrap(),
    ])
    .unwrap()
}

struct App {
    router: Router,
    clock: ManualClock,
    runs: Arc<AtomicUsize>,
}

fn app(source: KeySource, layer: impl FnOnce(LimiterLayer) -> LimiterLayer) -> App {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let handler = post(move |body: Bytes| {
        let counter = Arc::clone(&counter);
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            format!("read {} bytes", body.len())
        }
    })
    .layer(LimitLayer::new("posts-create", posts_policy(), source));
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    let router = Router::new()
        .route("/posts", handler)
        .layer(layer(LimiterLayer::new(limiter)));
    App {
        router,
        clock,
        runs,
    }
}

impl App {
    /// A request from `from` through the router.
    async fn send(&self, from: &str) -> Response {
        self.send_request(request(from)).await
    }

    async fn send_request(&self, request: Request<Body>) -> Response {
        self.router.clone().oneshot(request).await.unwrap()
    }
}

fn request(from: &str) -> Request<Body> {
    let mut request = Request::post("/posts").body(Body::from("hello")).unwrap();
    let peer: SocketAddr = format!("{from}:5000").parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response.headers()[name].to_str().unwrap()
}

#[tokio::test]
async fn over_the_limit_answers_429_with_exact_fields() {
    let app = app(KeySource::ip(), |l| l);
    for remaining in [1, 0] {
        let ok = app.send("203.0.113.7").await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(
            header(&ok, "ratelimit"),
            format!(
                "\"2-per-60s\";r={remaining};t=60, \"3-per-120s\";r={};t=120",
                remaining + 1
            )
        );
    }
    app.clock.advance(Duration::from_millis(59_500));
    let denied = app.send("203.0.113.7").await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // 0.5 s until the first entry leaves: Retry-After rounds up to 1.
    assert_eq!(header(&denied, "retry-after"), "1");
    assert_eq!(
        header(&denied, "ratelimit-policy"),
        "\"2-per-60s\";q=2;w=60, \"3-per-120s\";q=3;w=120"
    );
    assert_eq!(
        header(&denied, "ratelimit"),
        "\"2-per-60s\";r=0;t=1, \"3-per-120s\";r=1;t=61"
    );
    assert_eq!(header(&denied, "content-type"), "application/problem+json");
    let body = axum::body::to_bytes(denied.into_body(), 4096)
        .await
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded (2-per-60s); retry after 1 s.","violated-policies":["2-per-60s"]}"#
    );
    // Another client is unaffected; after Retry-After the first passes again.
    let other = app.send("198.51.100.1").await;
    assert_eq!(other.status(), StatusCode::OK);
    app.clock.advance(Duration::from_secs(1));
    let again = app.send("203.0.113.7").await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(app.runs.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_denied_request_runs_no_handler_and_reads_no_body() {
    let app = app(KeySource::global(), |l| l);
    for _ in 0..2 {
        let ok = app.send("203.0.113.7").await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
    // A body that panics when read: reading it would fail the test.
    let mut denied = Request::post("/posts")
        .body(Body::from_stream(Unreadable))
        .unwrap();
    denied.extensions_mut().insert(ConnectInfo(
        "203.0.113.7:5000".parse::<SocketAddr>().unwrap(),
    ));
    let response = app.send_request(denied).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(app.runs.load(Ordering::SeqCst), 2);
}

/// A request body whose first read panics.
struct Unreadable;

impl futures_util::Stream for Unreadable {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        panic!("the body of a denied request was read")
    }
}

#[tokio::test]
async fn a_request_without_a_user_gets_401_and_the_status_is_configurable() {
    let by_user = |l: LimiterLayer| l.user(user_of);
    let named_users = app(KeySource::user(), by_user);
    let anonymous = named_users.send("203.0.113.7").await;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let mut named = request("203.0.113.7");
    named
        .headers_mut()
        .insert("x-user-id", "laoqian".parse().unwrap());
    let response = named_users.send_request(named).await;
    assert_eq!(response.status(), StatusCode::OK);

    let app = app(KeySource::user(), |l: LimiterLayer| {
        l.user(|_| None)
            .missing_identity_status(StatusCode::FORBIDDEN)
    });
    let anonymous = app.send("203.0.113.7").await;
    assert_eq!(anonymous.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn legacy_headers_and_quiet_allowed_responses_are_options() {
    let app = app(KeySource::ip(), |l| {
        l.legacy_headers(true).rate_limit_headers(false)
    });
    let ok = app.send("203.0.113.7").await;
    assert!(ok.headers().get("ratelimit").is_none());
    app.send("203.0.113.7").await;
    let denied = app.send("203.0.113.7").await;
    assert_eq!(header(&denied, "x-ratelimit-limit"), "2");
    assert_eq!(header(&denied, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&denied, "x-ratelimit-reset"), "60");
}

#[tokio::test(start_paused = true)]
async fn a_leaky_bucket_paces_handlers_and_handlers_see_the_decision() {
    let started = tokio::time::Instant::now();
    let policy = Policy::leaky_bucket(limiter_tower::Rate::per_second(20).unwrap(), 3).unwrap();
    let handler = post(
        move |axum::Extension(decision): axum::Extension<limiter_tower::Decision>| async move {
            // When the handler runs, and what the limiter told it.
            format!("{} {}", started.elapsed().as_millis(), decision.remaining())
        },
    )
    .layer(LimitLayer::new("posts", policy, KeySource::global()));
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let router = Router::new()
        .route("/posts", handler)
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::with_clock(
            clock,
        ))));
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(tokio::spawn(router.clone().oneshot(request("203.0.113.7"))));
    }
    let mut bodies = Vec::new();
    for run in runs {
        let response = run.await.unwrap().unwrap();
        let body = axum::body::to_bytes(response.into_body(), 100)
            .await
            .unwrap();
        bodies.push(String::from_utf8(body.to_vec()).unwrap());
    }
    // One every 50 ms (20 per second), in order, instead of all at once.
    assert_eq!(bodies, ["0 2", "50 1", "100 0"]);
    let full = router
        .clone()
        .oneshot(request("203.0.113.7"))
        .await
        .unwrap();
    assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// Takes the decision: its argument names `Decision`.
#[limiter_tower::rate_limit(rules = [(3, 60s)], by = global)]
async fn takes_the_decision(
    axum::Extension(decision): axum::Extension<limiter_tower::Decision>,
) -> String {
    decision.remaining().to_string()
}

/// Looks for the decision among the extensions without naming its type in
/// an argument.
#[limiter_tower::rate_limit(rules = [(3, 60s)], by = global)]
async fn does_not_take_it(request: axum::extract::Request) -> String {
    let found = request
        .extensions()
        .get::<limiter_tower::Decision>()
        .is_some();
    format!("decision in the request: {found}")
}

#[tokio::test]
async fn macro_handlers_get_the_decision_only_when_they_take_it() {
    let router = Router::new()
        .route("/takes", post(takes_the_decision))
        .route("/looks", post(does_not_take_it))
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let body = |path: &'static str| {
        let router = router.clone();
        async move {
            let request = Request::post(path).body(Body::empty()).unwrap();
            let response = router.oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let bytes = axum::body::to_bytes(response.into_body(), 100)
                .await
                .unwrap();
            String::from_utf8(bytes.to_vec()).unwrap()
        }
    };
    assert_eq!(body("/takes").await, "2");
    assert_eq!(body("/takes").await, "1");
    assert_eq!(body("/looks").await, "decision in the request: false");
}

#[tokio::test]
async fn two_limits_on_one_route_both_count_and_both_report() {
    // The outer limit allows 3 a minute per client; the inner one, which
    // finds the router layer too, 2 a minute (and 3 per 120 s) for everyone.
    let per_client = Policy::sliding_log([Rule::new(3, Duration::from_secs(60)).unwrap()]).unwrap();
    let handler = post(|| async { "ok" })
        .layer::<_, std::convert::Infallible>(LimitLayer::new(
            "posts-everyone",
            posts_policy(),
            KeySource::global(),
        ))
        .layer::<_, std::convert::Infallible>(LimitLayer::new(
            "posts-client",
            per_client,
            KeySource::ip(),
        ));
    let router = Router::new()
        .route("/posts", handler)
        .layer(LimiterLayer::new(Limiter::new(MemoryStore::new())));
    let send = |from: &'static str| router.clone().oneshot(request(from));
    let all = |response: &Response, name: &str| -> Vec<String> {
        let values = response.headers().get_all(name).iter();
        values.map(|v| v.to_str().unwrap().to_owned()).collect()
    };
    let first = send("203.0.113.7").await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    // Both lists, the inner limit's items first.
    assert_eq!(
        all(&first, "ratelimit"),
        [
            "\"2-per-60s\";r=1;t=60, \"3-per-120s\";r=2;t=120",
            "\"3-per-60s\";r=2;t=60"
        ]
    );
    assert_eq!(send("198.51.100.1").await.unwrap().status(), StatusCode::OK);
    // A third client: its own quota has room, everyone's does not.
    let denied = send("192.0.2.1").await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        all(&denied, "ratelimit"),
        [
            "\"2-per-60s\";r=0;t=60, \"3-per-120s\";r=1;t=120",
            "\"3-per-60s\";r=2;t=60"
        ]
    );
}

/// The names before `LimiterLayer` still build and limit alike, for one
/// release.
#[tokio::test]
#[allow(deprecated)]
async fn the_former_names_still_limit() {
    let limiter = Limiter::new(MemoryStore::new());
    let layer: limiter_tower::RateLimitLayer = limiter_tower::RateLimitLayer::new(limiter);
    let router: Router = Router::new()
        .route(
            "/posts",
            post(|| async { "created" }).layer(LimitLayer::new(
                "posts-create",
                posts_policy(),
                KeySource::ip(),
            )),
        )
        .layer(layer);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = router
            .clone()
            .oneshot(request("203.0.113.7"))
            .await
            .unwrap();
        statuses.push(response.status());
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let _: Option<limiter_tower::RateLimit<()>> = None;
    let _: Option<limiter_tower::RateLimitFuture<()>> = None;
    let _: Option<limiter_tower::OverrideHeld> = None;
}
