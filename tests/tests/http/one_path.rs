//! One decision path: the UGC server's per-user login limit, checked in
//! its handler, gets every operator handle a route's limit gets — a live
//! override (its rules, off), the admin view of the policy in force, top
//! offenders, decision counters — and its refusals never count as failed
//! logins of the address. Top offenders show an identity the admin routes
//! name as it is, and `GET /admin/limits` lists every limit. On the memory
//! store and with two instances on Redis. Then a property: any sequence of
//! operator changes and checks gives the same answers through a route and
//! through `Control` ([`property`]).

use crate::overrides::common;
#[path = "one_path/handle.rs"]
mod handle;
#[path = "one_path/property.rs"]
mod property;

use std::net::SocketAddr;
use std::time::Duration;

use limiter_tests::eventually::LOOK_EVERY;

use common::{TOKEN, admin, client, memory_instance, redis_instance, subscribed};
use limiter_tests::http::{Response, send, send_from};
use limiter_tests::{RedisServer, UgcServer, sample};
use serde_json::{Value, json};

const RIGHT: &str = "let-me-in";
const WRONG: &str = "hunter2";
const LOGIN_OVERRIDE: &str = "/admin/overrides/login-per-user";

/// Two instances sharing one store: one instance twice on the memory
/// store; two on one Redis, each with a store of its own.
async fn instances(on_redis: bool) -> (SocketAddr, SocketAddr, Option<RedisServer>) {
    if !on_redis {
        let addr = memory_instance().await;
        return (addr, addr, None);
    }
    let redis = RedisServer::start();
    let a = redis_instance(&redis).await;
    let b = redis_instance(&redis).await;
    subscribed(&redis, &[a, b]).await;
    (a, b, Some(redis))
}

async fn login(addr: SocketAddr, from: u8, user: &str, password: &str) -> u16 {
    let body = json!({ "user": user, "password": password }).to_string();
    let headers: [(&str, &[u8]); 1] = [("content-type", b"application/json")];
    let response = send_from(
        client(from),
        addr,
        "POST",
        "/login",
        &headers,
        body.as_bytes(),
    )
    .await
    .unwrap();
    response.status
}

async fn admin_json(addr: SocketAddr, path: &str) -> Value {
    let response = admin(addr, "GET", path, "", Some(TOKEN)).await;
    assert_eq!(response.status, 200, "{response:#?}");
    serde_json::from_str(&response.body).unwrap()
}

/// The state `GET /admin/limits/user/{user}` shows of the limit `name`.
async fn state_of(addr: SocketAddr, user: &str, name: &str) -> Value {
    let states = admin_json(addr, &format!("/admin/limits/user/{user}")).await;
    named(&states, name).clone()
}

/// The entry of `listed` (a JSON list of limits) named `name`.
fn named<'a>(listed: &'a Value, name: &str) -> &'a Value {
    let found = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name);
    found.unwrap_or_else(|| panic!("no {name} in {listed}"))
}

async fn put_override(addr: SocketAddr, path: &str, body: &str) -> Response {
    admin(addr, "PUT", path, body, Some(TOKEN)).await
}

async fn an_override_reaches_the_login_limit_checked_in_the_handler(on_redis: bool) {
    let (a, b, _redis) = instances(on_redis).await;
    // Each run a user of its own: the runs share the store on Redis.
    let victim = if on_redis {
        "victim-on-redis"
    } else {
        "victim-on-memory"
    };
    let set = put_override(
        a,
        LOGIN_OVERRIDE,
        r#"{"rules": [[1, "15m"]], "seconds": 120}"#,
    )
    .await;
    assert_eq!(set.status, 204, "{set:#?}");
    // 4 wrong logins of one user from 4 addresses, on both instances.
    let mut statuses = Vec::new();
    for (i, addr) in [b, a, b, a].into_iter().enumerate() {
        statuses.push(login(addr, 10 + i as u8, victim, WRONG).await);
    }
    assert_eq!(statuses, [401, 429, 429, 429]);

    // The admin view answers what the next check would, and names it.
    for addr in [a, b] {
        let state = state_of(addr, victim, "login-per-user").await;
        let seconds = state["override"]["seconds"].as_u64().unwrap();
        // The memory store's clock is moved by hand: exact. Redis's runs
        // on: rounded up, 120 until a whole second has passed since the PUT.
        let expected = if on_redis { 119..=120 } else { 120..=120 };
        assert!(expected.contains(&seconds), "{state}");
        assert_eq!(
            state,
            json!({
                "route": "POST /login", "name": "login-per-user", "kind": "user",
                "policy": "1-per-900s", "limit": 1, "allowed": false, "remaining": 0,
                "reset": state["reset"], "retry_after": state["retry_after"],
                "override": { "mode": "enforce", "seconds": seconds },
            })
        );
        assert!(state["retry_after"].as_u64().unwrap() > 890, "{state}");
    }

    // Top offenders count the handler's denials: every instance answers
    // the four wrong logins' three denials, its own counted live and the
    // other's as it published them (on Redis a denied two, b one).
    for addr in [a, b] {
        let victim_row = async || {
            let top = admin_json(addr, "/admin/top/login-per-user").await;
            let rows = top["offenders"].as_array().unwrap();
            rows.iter().find(|row| row["identity"] == victim).cloned()
        };
        let expected = json!({ "kind": "user", "identity": victim, "denied": 3, "error": 0 });
        let since = std::time::Instant::now();
        let what = || format!("{addr} never counted the victim's 3 denials");
        limiter_tests::eventually::until(
            since,
            Duration::from_secs(15),
            LOOK_EVERY,
            what,
            async || victim_row().await.as_ref() == Some(&expected),
        )
        .await;
    }

    // Off: nothing is checked, every wrong login is the handler's 401.
    let off = put_override(a, LOGIN_OVERRIDE, r#"{"mode": "off", "seconds": 120}"#).await;
    assert_eq!(off.status, 204, "{off:#?}");
    let mut statuses = Vec::new();
    for (i, addr) in [a, b, a, b, a, b, a].into_iter().enumerate() {
        statuses.push(login(addr, 20 + i as u8, victim, WRONG).await);
    }
    assert_eq!(statuses, [401; 7]);
    let state = state_of(b, victim, "login-per-user").await;
    assert_eq!(
        (&state["allowed"], &state["override"]["mode"]),
        (&json!(true), &json!("off"))
    );

    // A route's limit tightened: the view shows its rules, then the denial.
    let replies = put_override(
        a,
        "/admin/overrides/posts-create_reply",
        r#"{"rules": [[1, "60s"]], "seconds": 120}"#,
    )
    .await;
    assert_eq!(replies.status, 204, "{replies:#?}");
    let state = state_of(b, "replier", "posts-create_reply").await;
    assert_eq!(
        (&state["policy"], &state["remaining"]),
        (&json!("1-per-60s"), &json!(1))
    );
    assert_eq!(common::reply(b, "replier").await.status, 201);
    let state = state_of(a, "replier", "posts-create_reply").await;
    assert_eq!(
        (&state["allowed"], &state["remaining"]),
        (&json!(false), &json!(0))
    );
    assert_eq!(common::reply(a, "replier").await.status, 429);
}

#[tokio::test]
async fn an_override_reaches_the_login_limit_on_memory() {
    an_override_reaches_the_login_limit_checked_in_the_handler(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_reaches_the_login_limit_on_two_redis_instances() {
    an_override_reaches_the_login_limit_checked_in_the_handler(true).await;
}

/// The per-address limit counts failed logins, the handler's 401s: a 429
/// of the per-user limit, or a blocked user's, is not one.
async fn refusals_are_not_failed_logins_of_the_address(on_redis: bool) {
    let (a, b, _redis) = instances(on_redis).await;
    for i in 0..5 {
        assert_eq!(login(a, 30 + i, "victim", WRONG).await, 401);
    }
    // The victim retries its right password at its office's NAT.
    let nat = 40;
    for addr in [a, b, a, b, a] {
        assert_eq!(login(addr, nat, "victim", RIGHT).await, 429);
    }
    assert_eq!(login(b, nat, "colleague", RIGHT).await, 200);

    // A blocked user, at another NAT.
    let block = admin(
        a,
        "PUT",
        "/admin/blocks/user/mallory",
        r#"{"seconds": 600}"#,
        Some(TOKEN),
    )
    .await;
    assert_eq!(block.status, 204, "{block:#?}");
    let nat = 41;
    for addr in [a, b, a, b, a, b] {
        assert_eq!(login(addr, nat, "mallory", RIGHT).await, 429);
    }
    assert_eq!(login(a, nat, "colleague", RIGHT).await, 200);
    // The address's own failures still count: 5 wrong logins, then 429.
    for user in ["u1", "u2", "u3", "u4", "u5"] {
        assert_eq!(login(b, nat, user, WRONG).await, 401);
    }
    assert_eq!(login(b, nat, "u6", RIGHT).await, 429);
}

#[tokio::test]
async fn refusals_are_not_failed_logins_on_memory() {
    refusals_are_not_failed_logins_of_the_address(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_not_failed_logins_on_two_redis_instances() {
    refusals_are_not_failed_logins_of_the_address(true).await;
}

async fn search(addr: SocketAddr, key: &str) -> Response {
    let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
    send(addr, "GET", "/search", &headers, b"").await.unwrap()
}

/// A long API key is shown whole, escaped for a URL; given back to the
/// admin routes as shown, it blocks that key; a key spelling another's
/// hashed key form is a row of its own that looks different.
#[tokio::test]
async fn a_long_api_key_is_shown_as_the_admin_routes_name_it() {
    let addr = memory_instance().await;
    let long = format!("key/{}", "x".repeat(196));
    let mut hashed = String::new();
    limiter_core::push_identity(&mut hashed, &long);
    assert!(hashed.starts_with("%sha256-"), "{hashed}");
    for key in [&long, &hashed] {
        let statuses: Vec<u16> = futures_statuses(addr, key, 11).await;
        assert_eq!(
            statuses.iter().filter(|s| **s == 429).count(),
            1,
            "{statuses:?}"
        );
    }
    let top = admin_json(addr, "/admin/top/business-search").await["offenders"].take();
    let shown_long = format!("key%2F{}", "x".repeat(196));
    let shown_hashed = format!("%25{}", &hashed[1..]);
    assert_eq!(
        top,
        json!([
            { "kind": "key", "identity": shown_long, "denied": 1, "error": 0 },
            { "kind": "key", "identity": shown_hashed, "denied": 1, "error": 0 },
        ])
        .as_array()
        .map(|rows| {
            // Equal counts: the sketch lists them in either order.
            let mut rows = rows.clone();
            if top[0]["identity"] == shown_hashed {
                rows.reverse();
            }
            Value::Array(rows)
        })
        .unwrap()
    );
    let path = format!("/admin/blocks/key/{shown_long}");
    let block = admin(addr, "PUT", &path, r#"{"seconds": 600}"#, Some(TOKEN)).await;
    assert_eq!(block.status, 204, "{block:#?}");
    let blocked = search(addr, &long).await;
    assert_eq!(blocked.status, 429, "{blocked:#?}");
    assert!(
        blocked.body.contains(limiter_tower::BLOCKED),
        "{blocked:#?}"
    );
    // The other key is not blocked: only its rate limit answers.
    let other = admin(
        addr,
        "GET",
        &format!("/admin/blocks/key/{shown_hashed}"),
        "",
        Some(TOKEN),
    )
    .await;
    assert_eq!(other.status, 404, "{other:#?}");
}

async fn futures_statuses(addr: SocketAddr, key: &str, n: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..n {
        statuses.push(search(addr, key).await.status);
    }
    statuses
}

/// `GET /admin/limits`: every limit by the name overrides and top
/// offenders take, with its kind, route, rules and the override in force.
#[tokio::test]
async fn every_limit_is_listed_by_name() {
    let addr = memory_instance().await;
    let set = put_override(
        addr,
        LOGIN_OVERRIDE,
        r#"{"rules": [[2, "15m"]], "seconds": 300}"#,
    )
    .await;
    assert_eq!(set.status, 204, "{set:#?}");
    let listed = admin_json(addr, "/admin/limits").await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "api-search",
            "business-search",
            "feed-feed",
            "login-login",
            "login-per-user",
            "posts-create_post",
            "posts-create_reply",
            "posts-like",
        ]
    );
    let login = named(&listed, "login-per-user");
    let seconds = login["override"]["seconds"].as_u64().unwrap();
    // The memory store's clock is moved by hand: exactly the override's.
    assert_eq!(seconds, 300, "{login}");
    assert_eq!(
        login,
        &json!({
            "name": "login-per-user", "route": "POST /login", "kind": "user",
            "algorithm": "sliding_log", "rules": ["2-per-900s"], "compiled": ["5-per-900s"],
            "override": { "mode": "enforce", "seconds": seconds },
        })
    );
    let search = named(&listed, "business-search");
    assert_eq!(
        search,
        &json!({
            "name": "business-search", "route": "GET /search", "kind": "key",
            "algorithm": "sliding_log", "rules": ["10-per-60s"], "compiled": ["10-per-60s"],
        })
    );
}

/// `/metrics` counts the login limit's decisions, made in the handler.
#[tokio::test]
async fn the_login_limits_decisions_are_counted() {
    let app = UgcServer::start(&[("LIMITER_ADMIN_TOKEN", "metrics-token-0123456789")]);
    for i in 0..6 {
        login(app.addr(), 50 + i, "counted", WRONG).await;
    }
    let metrics = send(app.addr(), "GET", "/metrics", &[], b"")
        .await
        .unwrap()
        .body;
    let decisions = |outcome: &str| {
        sample(
            &metrics,
            &[
                "limiter_decisions_total{",
                &format!("outcome=\"{outcome}\""),
                "source=\"store\"",
                "limit=\"login-per-user\"",
                "override=\"false\"",
            ],
        )
    };
    assert_eq!((decisions("allowed"), decisions("denied")), (5.0, 1.0));
}

/// A store that fails answers alike through the route and in a handler:
/// failing closed, 503 on the route and `Error::Unavailable` in the
/// handler; in shadow mode, both let the request through.
#[tokio::test]
async fn a_store_failure_answers_alike_on_the_route_and_in_a_handler() {
    use limiter_tower::{
        Error, Identity, KeySource, LimitLayer, Limiter, OnStoreError, Policy, RedisStore, Rule,
    };

    let nobody = RedisServer::unused_port();
    let policy = Policy::sliding_log([Rule::new(1, std::time::Duration::from_secs(60)).unwrap()]);
    for shadow in [false, true] {
        let store = RedisStore::open(&format!("redis://127.0.0.1:{nobody}/")).unwrap();
        let limit = LimitLayer::new("failing", policy.clone().unwrap(), KeySource::user())
            .on_store_error(OnStoreError::FailClosed)
            .shadow(shadow);
        let (app, control) = property::on_route(Limiter::new(store), &limit);
        let on_route = property::route_status(&app, "ann").await;
        let in_handler = control.attempt_on(&limit, &Identity::user("ann")).await;
        if shadow {
            assert_eq!(on_route, 200);
            assert!(in_handler.unwrap().decision().allowed());
        } else {
            assert_eq!(on_route, 503);
            assert!(
                matches!(in_handler, Err(Error::Unavailable(_))),
                "{in_handler:?}"
            );
        }
    }
}

/// A limit's allow and deny lists of identities answer alike on its route
/// and in a handler: an allowed user passes unchecked, a denied one gets
/// the lists' 403.
#[tokio::test]
async fn allow_and_deny_lists_answer_alike_on_the_route_and_in_a_handler() {
    use limiter_tower::{KeySource, LimitLayer, Limiter, MemoryStore, Policy, Rule};

    let policy = Policy::sliding_log([Rule::new(1, std::time::Duration::from_secs(60)).unwrap()]);
    let limit = LimitLayer::new("listed", policy.unwrap(), KeySource::user())
        .allow_identities(["vip"])
        .deny_identities(["mallory"]);
    let (app, control) = property::on_route(Limiter::new(MemoryStore::new()), &limit);
    for (user, expected) in [("vip", [200, 200, 200]), ("mallory", [403, 403, 403])] {
        let mut on_route = Vec::new();
        let mut in_handler = Vec::new();
        for _ in 0..3 {
            on_route.push(property::route_status(&app, user).await);
            in_handler.push(property::handler_status(&control, &limit, user).await);
        }
        assert_eq!((user, on_route), (user, expected.to_vec()));
        assert_eq!((user, in_handler), (user, expected.to_vec()));
    }
}

/// Every entry point answers one `Attempt` type, read and given back
/// alike: `Limiter::attempt`, `Control::attempt` and `Control::attempt_on`
/// on one store. A recorded attempt carries its receipt and its refund
/// leaves the key as it was; a blocked identity's attempt says so through
/// each.
#[tokio::test]
async fn every_entry_point_answers_one_attempt_type() {
    use limiter_tower::{
        Attempt, Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy,
        Refused, Rule,
    };

    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60)).unwrap()]).unwrap();
    let limiter = Limiter::new(MemoryStore::new());
    let control = LimiterLayer::new(limiter.clone()).control();
    let per_user = LimitLayer::new("one-attempt", policy.clone(), KeySource::user());
    let ada = Identity::user("ada");
    // The limit's key after the prefix: the identity's part, then its name.
    let mut key = String::new();
    ada.push_key(&mut key);
    key.push_str(":one-attempt");
    let attempts = async || -> [Attempt; 3] {
        [
            limiter.attempt(&key, &policy).await.unwrap(),
            control.attempt(&key, &policy).await.unwrap(),
            control.attempt_on(&per_user, &ada).await.unwrap(),
        ]
    };
    // Each of the three counts on the same key: the third is denied.
    let [first, second, third] = attempts().await;
    let allowed = [&first, &second, &third].map(|a| a.decision().allowed());
    assert_eq!(allowed, [true, true, false]);
    assert!(first.receipt().is_some() && second.receipt().is_some());
    assert_eq!((third.receipt(), third.refusal()), (None, None));
    first.refund().await.unwrap();
    second.refund().await.unwrap();
    third.refund().await.unwrap();
    // Given back: the key holds nothing, so two pass again.
    let [first, second, third] = attempts().await;
    let allowed = [&first, &second, &third].map(|a| a.decision().allowed());
    assert_eq!(allowed, [true, true, false]);
    for attempt in [first, second] {
        attempt.refund().await.unwrap();
    }

    control.block(&ada, Duration::from_secs(60)).await.unwrap();
    for attempt in attempts().await {
        assert!(!attempt.decision().allowed());
        assert!(
            matches!(attempt.refusal(), Some(Refused::Blocked(_))),
            "{attempt:?}"
        );
        assert_eq!(attempt.receipt(), None);
    }
}
