//! The identities each limit denied most, through real HTTP: requests
//! denied by a router's limits (on the memory store, which decides at
//! once; on Redis, which is awaited; by the fallback limiter while the
//! store is down; by a concurrency limit; while blocked), then
//! `GET /admin/top/{limit}` lists them, most denied first, with exact
//! counts; and on the UGC server, behind its admin token.

use crate::control::common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use common::{ADMIN_TOKEN, admin, memory_server, reply};
use limiter_tests::http::{Response, send, send_from};
use limiter_tests::redis;
use limiter_tower::{
    Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule, Store,
};
use serde_json::{Value, json};

fn one_per_minute() -> Policy {
    Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// Replies (by user), posts (by address), search (by API key), a global
/// feed, and a shadowed limit by user, each allowing 1 request a minute,
/// with the admin routes at `/admin`.
async fn server<S: Store + Clone>(limiter: Limiter<S>) -> (SocketAddr, limiter_tower::Control) {
    server_named(limiter, "test-instance-1", Duration::from_secs(5)).await
}

/// [`server`], its instance named `instance`, publishing its counts every
/// `every`.
async fn server_named<S: Store + Clone>(
    limiter: Limiter<S>,
    instance: &str,
    every: Duration,
) -> (SocketAddr, limiter_tower::Control) {
    let replies = LimitLayer::new("replies", one_per_minute(), KeySource::user());
    let posts = LimitLayer::new("posts", one_per_minute(), KeySource::ip());
    let search = LimitLayer::new(
        "search",
        one_per_minute(),
        KeySource::header("x-api-key".parse().unwrap()),
    );
    let feed = LimitLayer::new("feed", one_per_minute(), KeySource::global());
    let drafts = LimitLayer::new("drafts", one_per_minute(), KeySource::user()).shadow(true);
    let layer = LimiterLayer::new(limiter)
        .publish_offenders_every(every)
        .user(|parts| {
            let user = parts.headers.get("x-user-id")?.to_str().ok()?;
            Some(user.to_owned())
        });
    let control = layer
        .control()
        .limit("POST /replies", &replies)
        .limit("POST /posts", &posts)
        .limit("POST /search", &search)
        .limit("POST /feed", &feed)
        .limit("POST /drafts", &drafts)
        .instance_id(instance);
    let ok = || post(|| async { "ok" });
    let app = Router::new()
        .route("/replies", ok().layer(replies))
        .route("/posts", ok().layer(posts))
        .route("/search", ok().layer(search))
        .route("/feed", ok().layer(feed))
        .route("/drafts", ok().layer(drafts))
        .nest("/admin", control.router())
        .layer(layer);
    (limiter_tests::http::serve(app).await, control)
}

async fn post_as(addr: SocketAddr, path: &str, header: (&str, &str)) -> Response {
    let headers: [(&str, &[u8]); 1] = [(header.0, header.1.as_bytes())];
    send(addr, "POST", path, &headers, b"").await.unwrap()
}

/// `GET path`; a 200's body becomes its list of offenders, once the
/// answer is checked to hold this instance's counts, read live.
async fn top(addr: SocketAddr, path: &str) -> Response {
    let mut response = send(addr, "GET", path, &[], b"").await.unwrap();
    if response.status == 200 {
        response.body = offenders_of(&response.body, response.header("limiter-instance"));
    }
    response
}

/// The offenders of a `GET /top/{limit}` answer's `body` from the instance
/// `instance`, which it names first, its counts read live.
fn offenders_of(body: &str, instance: &str) -> String {
    let mut answer: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        answer["instances"][0],
        json!({ "instance": instance, "age_ms": 0 }),
        "{answer}"
    );
    answer["offenders"].take().to_string()
}

fn offender(kind: &str, identity: &str, denied: u64) -> Value {
    json!({ "kind": kind, "identity": identity, "denied": denied, "error": 0 })
}

/// Sends `times` requests as `user` to `path`: the first passes, the rest
/// are denied.
async fn as_user(addr: SocketAddr, path: &str, user: &str, times: usize) {
    for i in 0..times {
        let status = post_as(addr, path, ("x-user-id", user)).await.status;
        assert_eq!(status, if i == 0 { 200 } else { 429 }, "{user} {i}");
    }
}

/// The denials of each kind, counted exactly and listed most denied
/// first; shadow mode's and a global limit's are not counted.
async fn denials_are_listed_by_limit(addr: SocketAddr, control: &limiter_tower::Control) {
    // Nothing denied yet: an empty list, from this instance.
    let response = top(addr, "/admin/top/replies").await;
    assert_eq!(response.status, 200, "{response:#?}");
    assert_eq!(response.header("limiter-instance"), "test-instance-1");
    assert_eq!(response.header("content-type"), "application/json");
    assert_eq!(response.body, "[]");

    // Interleaved: mallory 5 denials, alice 3 (one of them a name that
    // needs escaping), bob 1, carol none.
    as_user(addr, "/replies", "carol", 1).await;
    as_user(addr, "/replies", "alice: the 2nd", 4).await;
    as_user(addr, "/replies", "mallory", 3).await;
    as_user(addr, "/replies", "bob", 2).await;
    for _ in 0..3 {
        let status = post_as(addr, "/replies", ("x-user-id", "mallory"))
            .await
            .status;
        assert_eq!(status, 429);
    }
    let response = top(addr, "/admin/top/replies").await;
    assert_eq!(response.status, 200, "{response:#?}");
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(
        listed,
        json!([
            offender("user", "mallory", 5),
            // Shown as the admin routes take it, its space encoded.
            offender("user", "alice:%20the%202nd", 3),
            offender("user", "bob", 1),
        ])
    );
    // `n` bounds the list.
    let response = top(addr, "/admin/top/replies?n=2").await;
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(
        listed,
        json!([
            offender("user", "mallory", 5),
            offender("user", "alice:%20the%202nd", 3)
        ])
    );
    // The handle answers the same.
    let answer = control.top_denied("replies", 1).await.unwrap();
    assert_eq!(answer.instances[0].instance, "test-instance-1");
    let offenders = answer.offenders;
    assert_eq!(offenders.len(), 1);
    assert_eq!(offenders[0].identity, "mallory");
    assert_eq!((offenders[0].denied, offenders[0].error), (5, 0));

    // By address: the peer, 127.0.0.7, three times denied.
    for i in 0..4 {
        let from = [127, 0, 0, 7].into();
        let response = send_from(from, addr, "POST", "/posts", &[], b"")
            .await
            .unwrap();
        assert_eq!(response.status, if i == 0 { 200 } else { 429 });
    }
    let response = top(addr, "/admin/top/posts").await;
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(listed, json!([offender("ip", "127.0.0.7", 3)]));

    // By the API key header: kind `key`, as the admin routes name it.
    for i in 0..3 {
        let response = post_as(addr, "/search", ("x-api-key", "k-123")).await;
        assert_eq!(response.status, if i == 0 { 200 } else { 429 });
    }
    let response = top(addr, "/admin/top/search").await;
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(listed, json!([offender("key", "k-123", 2)]));

    // A global limit's denials name nobody; shadow mode denies nobody.
    for _ in 0..3 {
        post_as(addr, "/feed", ("x-user-id", "mallory")).await;
        let status = post_as(addr, "/drafts", ("x-user-id", "mallory"))
            .await
            .status;
        assert_eq!(status, 200);
    }
    for limit in ["feed", "drafts"] {
        let response = top(addr, &format!("/admin/top/{limit}")).await;
        assert_eq!((response.status, &*response.body), (200, "[]"), "{limit}");
    }

    // A blocked identity's requests are denials too.
    control
        .block(&Identity::user("bob"), Duration::from_secs(60))
        .await
        .unwrap();
    for _ in 0..4 {
        let status = post_as(addr, "/replies", ("x-user-id", "bob")).await.status;
        assert_eq!(status, 429);
    }
    let response = top(addr, "/admin/top/replies?n=1").await;
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(listed, json!([offender("user", "bob", 5)]));
}

/// A bad `n` is 400, an unknown limit 404, both problem+json.
async fn bad_requests_are_refused(addr: SocketAddr) {
    for query in ["n=0", "n=101", "n=ten", "n=-1", "limit=5", "n=5&n=6"] {
        let response = top(addr, &format!("/admin/top/replies?{query}")).await;
        assert_eq!(response.status, 400, "{query}: {response:#?}");
        assert_eq!(
            response.header("content-type"),
            "application/problem+json",
            "{query}"
        );
    }
    for n in [1, 100] {
        let response = top(addr, &format!("/admin/top/replies?n={n}")).await;
        assert_eq!(response.status, 200, "n={n}");
    }
    for limit in ["nope", "replie", "replies%20"] {
        let response = top(addr, &format!("/admin/top/{limit}")).await;
        assert_eq!(response.status, 404, "{limit}: {response:#?}");
        assert_eq!(response.header("content-type"), "application/problem+json");
    }
}

#[tokio::test]
async fn top_offenders_on_the_memory_store() {
    let (addr, control) = server(Limiter::new(MemoryStore::new())).await;
    denials_are_listed_by_limit(addr, &control).await;
    bad_requests_are_refused(addr).await;
}

/// On Redis the limit awaits the store's answer: the denial is counted
/// when the answer comes.
#[tokio::test]
async fn top_offenders_on_redis() {
    let redis = redis();
    let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
    let (addr, control) = server(limiter).await;
    denials_are_listed_by_limit(addr, &control).await;
}

/// The UGC server's admin routes list the replies' offenders behind the
/// admin token (replies are awaited: they wait and count penalties).
#[tokio::test]
async fn the_ugc_servers_admin_routes_list_top_offenders() {
    let (addr, _clock) = memory_server().await;
    for i in 0..7 {
        let status = reply(addr, "mallory").await.status;
        assert_eq!(status, if i < 5 { 201 } else { 429 }, "reply {i}");
    }
    assert_eq!(reply(addr, "alice").await.status, 201);
    let path = "/admin/top/posts-create_reply";
    assert_eq!(admin(addr, "GET", path, None).await.status, 401);
    let response = admin(addr, "GET", path, Some(ADMIN_TOKEN)).await;
    assert_eq!(response.status, 200, "{response:#?}");
    let instance = response.header("limiter-instance");
    assert!(!instance.is_empty());
    let listed: Value = serde_json::from_str(&offenders_of(&response.body, instance)).unwrap();
    assert_eq!(listed, json!([offender("user", "mallory", 2)]));
    let response = admin(addr, "GET", "/admin/top/nope", Some(ADMIN_TOKEN)).await;
    assert_eq!(response.status, 404);
}

/// Two UGC servers in one process share the handlers' static limits, yet
/// each lists the denials its own requests met: top offenders are kept
/// per router layer, as an instance's.
#[tokio::test]
async fn two_servers_in_one_process_list_their_own_offenders() {
    let ((a, _), (b, _)) = (memory_server().await, memory_server().await);
    for i in 0..7 {
        let status = reply(a, "trudy").await.status;
        assert_eq!(status, if i < 5 { 201 } else { 429 }, "reply {i}");
    }
    for i in 0..6 {
        let status = reply(b, "victor").await.status;
        assert_eq!(status, if i < 5 { 201 } else { 429 }, "reply {i}");
    }
    for (addr, listed) in [
        (a, offender("user", "trudy", 2)),
        (b, offender("user", "victor", 1)),
    ] {
        let response = admin(
            addr,
            "GET",
            "/admin/top/posts-create_reply",
            Some(ADMIN_TOKEN),
        )
        .await;
        assert_eq!(response.status, 200, "{response:#?}");
        let instance = response.header("limiter-instance");
        let top: Value = serde_json::from_str(&offenders_of(&response.body, instance)).unwrap();
        assert_eq!(top, json!([listed]));
    }
}

/// A concurrency limit's denials count too: a second export while the
/// first is in flight.
#[tokio::test]
async fn concurrency_denials_are_counted() {
    use limiter_tower::ConcurrencyLimit;
    use std::sync::Arc;
    use tokio::sync::Notify;

    let exports = LimitLayer::concurrent(
        "exports",
        ConcurrencyLimit::new(1).unwrap(),
        KeySource::user(),
    );
    let layer = LimiterLayer::new(Limiter::new(MemoryStore::new())).user(|parts| {
        let user = parts.headers.get("x-user-id")?.to_str().ok()?;
        Some(user.to_owned())
    });
    let control = layer.control().limit("POST /exports", &exports);
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = {
        let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
        move || async move {
            entered.notify_one();
            release.notified().await;
            "exported"
        }
    };
    let app = Router::new()
        .route("/exports", post(handler).layer(exports))
        .nest("/admin", control.router())
        .layer(layer);
    let addr = limiter_tests::http::serve(app).await;

    let first = tokio::spawn(post_as(addr, "/exports", ("x-user-id", "mallory")));
    entered.notified().await;
    for _ in 0..2 {
        let status = post_as(addr, "/exports", ("x-user-id", "mallory"))
            .await
            .status;
        assert_eq!(status, 429);
    }
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    let response = top(addr, "/admin/top/exports").await;
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(listed, json!([offender("user", "mallory", 2)]));
}

/// While the store is down, the fallback limiter's denials are counted.
#[tokio::test]
async fn fallback_denials_are_counted() {
    use limiter_tests::RedisServer;
    use limiter_tower::RedisStore;

    let dead = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    let (addr, _control) = server(Limiter::new(RedisStore::open(&dead).unwrap())).await;
    // The fallback keeps the limit's rules: one a minute.
    as_user(addr, "/replies", "mallory", 4).await;
    as_user(addr, "/replies", "alice", 2).await;
    // This instance's counts, and why no other's are in.
    let response = send(addr, "GET", "/admin/top/replies", &[], b"").await;
    let answer: Value = serde_json::from_str(&response.unwrap().body).unwrap();
    let unread = answer["unread"].as_str().unwrap();
    assert!(unread.starts_with("the store did not answer: "), "{unread}");
    let response = top(addr, "/admin/top/replies").await;
    let listed: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(
        listed,
        json!([offender("user", "mallory", 3), offender("user", "alice", 1)])
    );
}

/// Two instances on one Redis, each publishing its counts every 100 ms:
/// either answers one view, each identity's denials on both added up
/// exactly, naming both instances and how fresh the other's counts are.
#[tokio::test]
async fn two_instances_on_redis_answer_one_view() {
    let redis = redis();
    let every = Duration::from_millis(100);
    let mut instances = Vec::new();
    for name in ["web-a", "web-b"] {
        let limiter = Limiter::new(redis.store().await).with_prefix(redis.prefix());
        instances.push(server_named(limiter, name, every).await.0);
    }
    let (a, b) = (instances[0], instances[1]);
    // The limits are shared: the API key's first search passes on `a`,
    // then `a` denies it 3 times and `b` 5; `a` denies alice's replies
    // twice, `b` carol's once.
    let sends = [
        (a, "/search", ("x-api-key", "k-hot"), 4),
        (b, "/search", ("x-api-key", "k-hot"), 5),
        (a, "/replies", ("x-user-id", "alice"), 3),
        (b, "/replies", ("x-user-id", "carol"), 2),
    ];
    let mut denied = Vec::new();
    for (addr, path, header, times) in sends {
        let mut statuses = Vec::new();
        for _ in 0..times {
            statuses.push(post_as(addr, path, header).await.status);
        }
        denied.push(statuses.iter().filter(|s| **s == 429).count());
    }
    assert_eq!(denied, [3, 5, 2, 1]);
    let expected = [
        ("search", json!([offender("key", "k-hot", 8)])),
        (
            "replies",
            json!([offender("user", "alice", 2), offender("user", "carol", 1)]),
        ),
    ];
    for (addr, own, other) in [(a, "web-a", "web-b"), (b, "web-b", "web-a")] {
        for (limit, expected) in &expected {
            let path = format!("/admin/top/{limit}");
            let mut answer = Value::Null;
            let since = std::time::Instant::now();
            let what = || format!("{own} never listed both instances' {limit} denials");
            limiter_tests::eventually::until(
                since,
                Duration::from_secs(15),
                every,
                what,
                async || {
                    let response = send(addr, "GET", &path, &[], b"").await.unwrap();
                    answer = serde_json::from_str(&response.body).unwrap();
                    answer["offenders"] == *expected
                },
            )
            .await;
            let instances = answer["instances"].as_array().unwrap();
            assert_eq!(instances.len(), 2, "{answer}");
            assert_eq!(instances[0], json!({ "instance": own, "age_ms": 0 }));
            assert_eq!(instances[1]["instance"], other, "{answer}");
            // A report is read for three periods, 300 ms, and no longer.
            let age = instances[1]["age_ms"].as_u64().unwrap();
            assert!(age <= 300, "{answer}");
            assert!(answer.get("unread").is_none(), "{answer}");
        }
    }
}
