//! Counting by outcome over the UGC server's `POST /login`: at most 5
//! failed logins per client address a minute (the route's limit, which
//! counts failed responses only) and 5 per user in 15 minutes (checked in
//! the handler, given back on success). Successful logins never count;
//! failed ones racing are counted while in flight, so exactly the limit
//! reach the password check. On the memory store (time moved by hand) and
//! on Redis with two instances. (The layer's and the programmatic API's
//! refunds on their own are in `refunds.rs`.)

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use limiter_tests::http::{Response, send, send_from};
use limiter_tests::redis;
use limiter_tests::ugc::{ADMIN_TOKEN, memory_server, redis_server};
use serde_json::{Value, json};
use tokio::task::JoinSet;

const RIGHT: &str = "let-me-in";
const WRONG: &str = "hunter2";

/// The local address `127.0.0.{n}`: each a client of its own.
fn client(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

async fn login(addr: SocketAddr, from: IpAddr, user: &str, password: &str) -> Response {
    let body = json!({ "user": user, "password": password }).to_string();
    let headers: [(&str, &[u8]); 1] = [("content-type", b"application/json")];
    send_from(from, addr, "POST", "/login", &headers, body.as_bytes())
        .await
        .unwrap()
}

/// The first limit state in `response`'s list that is `wanted`.
fn login_limit(response: &Response, wanted: impl Fn(&Value) -> bool) -> Value {
    let states: Value = serde_json::from_str(&response.body).unwrap();
    let found = states
        .as_array()
        .unwrap()
        .iter()
        .find(|state| wanted(state));
    found
        .cloned()
        .unwrap_or_else(|| panic!("no such limit in {states}"))
}

/// The per-user login limit's state as `/me/limits` shows it.
async fn user_logins_left(addr: SocketAddr, user: &str) -> u64 {
    let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
    let response = send(addr, "GET", "/me/limits", &headers, b"")
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{response:#?}");
    let login = login_limit(&response, |state| state["route"] == "POST /login");
    assert_eq!(login["policy"], "5-per-900s", "{login}");
    login["remaining"].as_u64().unwrap()
}

/// The address limit's state, as the admin route shows it.
async fn address_logins_left(addr: SocketAddr, ip: IpAddr) -> u64 {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let headers: [(&str, &[u8]); 1] = [("authorization", auth.as_bytes())];
    let path = format!("/admin/limits/ip/{ip}");
    let response = send(addr, "GET", &path, &headers, b"").await.unwrap();
    assert_eq!(response.status, 200, "{response:#?}");
    let login = login_limit(&response, |state| {
        state["route"] == "POST /login" && state["policy"] == "5-per-60s"
    });
    login["remaining"].as_u64().unwrap()
}

/// Sends `n` failed logins of `user` from `from` at once, alternating
/// between `servers`; answers how many got each status.
async fn concurrent_failures(
    servers: &[SocketAddr],
    from: IpAddr,
    user: &str,
    n: usize,
) -> Statuses {
    let mut set = JoinSet::new();
    for i in 0..n {
        let addr = servers[i % servers.len()];
        let user = user.to_owned();
        set.spawn(async move { login(addr, from, &user, WRONG).await.status });
    }
    let mut statuses = Statuses::default();
    while let Some(status) = set.join_next().await {
        match status.unwrap() {
            401 => statuses.unauthorized += 1,
            429 => statuses.too_many += 1,
            other => panic!("status {other}"),
        }
    }
    statuses
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Statuses {
    /// Reached the password check.
    unauthorized: usize,
    too_many: usize,
}

/// 100 failed logins of `user` from `from` racing over `servers`: exactly
/// 5 reach the password check.
async fn assert_five_of_a_hundred_reach_the_check(
    servers: &[SocketAddr],
    from: IpAddr,
    user: &str,
) {
    let statuses = concurrent_failures(servers, from, user, 100).await;
    let expected = Statuses {
        unauthorized: 5,
        too_many: 95,
    };
    assert_eq!(statuses, expected);
}

/// 100 right logins of `user` from `from`, alternating over `servers`:
/// every one passes, and neither limit counts any.
async fn assert_successes_never_count(servers: &[SocketAddr], from: IpAddr, user: &str) {
    for i in 0..100 {
        let response = login(servers[i % servers.len()], from, user, RIGHT).await;
        assert_eq!(response.status, 200, "login {i}: {response:#?}");
    }
    assert_eq!(user_logins_left(servers[0], user).await, 5);
    assert_eq!(
        address_logins_left(servers[servers.len() - 1], from).await,
        5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_failed_logins_let_exactly_five_reach_the_password_check_on_memory() {
    let (addr, _clock) = memory_server().await;
    assert_five_of_a_hundred_reach_the_check(&[addr], client(2), "alice").await;
    // Over the limit, the right password gets 429 too.
    assert_eq!(login(addr, client(2), "alice", RIGHT).await.status, 429);
    assert_eq!(address_logins_left(addr, client(2)).await, 0);
}

#[tokio::test]
async fn successful_logins_never_count_and_failures_do_on_memory() {
    let (addr, clock) = memory_server().await;
    assert_successes_never_count(&[addr], client(3), "bob").await;
    // Four failures, then successes still pass.
    for _ in 0..4 {
        assert_eq!(login(addr, client(3), "bob", WRONG).await.status, 401);
    }
    assert_eq!(login(addr, client(3), "bob", RIGHT).await.status, 200);
    assert_eq!(user_logins_left(addr, "bob").await, 1);
    assert_eq!(address_logins_left(addr, client(3)).await, 1);
    // The fifth failure uses both limits up.
    assert_eq!(login(addr, client(3), "bob", WRONG).await.status, 401);
    let denied = login(addr, client(3), "bob", RIGHT).await;
    assert_eq!(denied.status, 429, "{denied:#?}");
    // The address limit frees after 60 s (the failures were all at one
    // time), the user's after 15 minutes.
    clock.advance(Duration::from_secs(60));
    let by_user = login(addr, client(3), "bob", RIGHT).await;
    assert_eq!(by_user.status, 429, "{by_user:#?}");
    // The user's limit denied it; the address limit adds its own item.
    assert_eq!(
        by_user.header("ratelimit-policy"),
        "\"5-per-900s\";q=5;w=900, \"5-per-60s\";q=5;w=60"
    );
    // Denied by the user's limit: a refusal, no failed login of the address.
    assert_eq!(address_logins_left(addr, client(3)).await, 5);
    clock.advance(Duration::from_secs(900));
    assert_eq!(login(addr, client(3), "bob", RIGHT).await.status, 200);
}

#[tokio::test]
async fn a_user_is_limited_across_addresses_and_an_address_across_users_on_memory() {
    let (addr, clock) = memory_server().await;
    // Five failures for carol, each from an address of its own.
    for n in 10..15 {
        assert_eq!(login(addr, client(n), "carol", WRONG).await.status, 401);
    }
    let denied = login(addr, client(15), "carol", RIGHT).await;
    assert_eq!(denied.status, 429, "{denied:#?}");
    assert_eq!(denied.header("retry-after"), "900");
    // Another user from those addresses is not held by carol's limit.
    assert_eq!(login(addr, client(10), "dave", RIGHT).await.status, 200);
    // Five failures of five users from one address: the sixth attempt,
    // another user's with the right password, is refused.
    for user in ["u1", "u2", "u3", "u4", "u5"] {
        assert_eq!(login(addr, client(20), user, WRONG).await.status, 401);
    }
    let denied = login(addr, client(20), "erin", RIGHT).await;
    assert_eq!(denied.status, 429, "{denied:#?}");
    assert_eq!(denied.header("retry-after"), "60");
    clock.advance(Duration::from_secs(60));
    assert_eq!(login(addr, client(20), "erin", RIGHT).await.status, 200);
    // An administrator's reset of carol clears her login limit too.
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let headers: [(&str, &[u8]); 1] = [("authorization", auth.as_bytes())];
    let reset = send(addr, "DELETE", "/admin/limits/user/carol", &headers, b"")
        .await
        .unwrap();
    assert_eq!(reset.status, 204, "{reset:#?}");
    assert_eq!(user_logins_left(addr, "carol").await, 5);
    assert_eq!(login(addr, client(16), "carol", RIGHT).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_redis_count_failures_together_and_successes_never() {
    let redis = redis();
    let a = redis_server(&redis).await;
    let b = redis_server(&redis).await;
    // 100 racing failures, half on each instance: exactly 5 reach the check.
    assert_five_of_a_hundred_reach_the_check(&[a, b], client(30), "frank").await;
    assert_eq!(login(b, client(30), "frank", RIGHT).await.status, 429);
    // 100 successes in a row, alternating: every one passes, nothing counts.
    assert_successes_never_count(&[a, b], client(31), "grace").await;
    // Failures on A count on B.
    for _ in 0..4 {
        assert_eq!(login(a, client(32), "heidi", WRONG).await.status, 401);
    }
    assert_eq!(login(b, client(32), "heidi", WRONG).await.status, 401);
    assert_eq!(login(b, client(32), "heidi", RIGHT).await.status, 429);
    assert_eq!(user_logins_left(a, "heidi").await, 0);
}
