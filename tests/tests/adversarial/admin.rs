//! The admin route `PUT /admin/plans/{key}`. Behind a proxy on the same host
//! every client's peer is loopback, so the peer says nothing about who is
//! asking: only `Authorization: Bearer <LIMITER_ADMIN_TOKEN>` lets a request
//! through, and without the variable the route does not exist. Against the
//! real `ugc` binary (real time: each check sends its searches well within
//! the 60 s window); the bound on the plan table in process, its clock
//! stopped.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use limiter_examples::admin::AdminToken;
use limiter_examples::business::{MAX_ASSIGNED_KEYS, PlanTable, SetPlanError};
use limiter_examples::{Options, app};
use limiter_tests::http::{Response, send, send_from, serve};
use limiter_tests::{UgcServer, ugc_start_up_error};
use limiter_tower::{Limiter, ManualClock, MemoryStore};

const TOKEN: &str = "s3cret-Admin_token.0123456789~";
const T0: Duration = Duration::from_secs(1_750_000_000);
/// The plan `free`: searches per 60 s.
const FREE: usize = 10;
/// The plan `pro`: searches per 60 s.
const PRO: usize = 100;

/// `PUT /admin/plans/{key}` with the body `plan` and `headers`.
async fn put_plan(addr: SocketAddr, key: &str, plan: &str, headers: &[(&str, &[u8])]) -> Response {
    put_plan_from(IpAddr::from([127, 0, 0, 1]), addr, key, plan, headers).await
}

/// [`put_plan`] sent from the loopback address `from`.
async fn put_plan_from(
    from: IpAddr,
    addr: SocketAddr,
    key: &str,
    plan: &str,
    headers: &[(&str, &[u8])],
) -> Response {
    let path = format!("/admin/plans/{key}");
    send_from(from, addr, "PUT", &path, headers, plan.as_bytes())
        .await
        .unwrap()
}

/// [`put_plan`] with `Authorization: {authorization}`.
async fn put_plan_as(addr: SocketAddr, key: &str, plan: &str, authorization: &[u8]) -> Response {
    put_plan(addr, key, plan, &[("authorization", authorization)]).await
}

/// Loopback addresses, one per request that fails to authenticate: ten
/// failures from one address within 60 s throttle it (see
/// `admin_throttle.rs`), and this module checks each refusal's own 401.
fn fresh_clients() -> impl Iterator<Item = IpAddr> {
    (1..=254).map(|n| IpAddr::from([127, 0, 1, n]))
}

fn bearer(token: &str) -> Vec<u8> {
    format!("Bearer {token}").into_bytes()
}

/// Sends `count` searches with `key` one after another: how many passed
/// (the others must be 429).
async fn searches_passed(addr: SocketAddr, key: &str, count: usize) -> usize {
    let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
    let mut passed = 0;
    for _ in 0..count {
        let response = send(addr, "GET", "/search", &headers, b"").await.unwrap();
        match response.status {
            200 => passed += 1,
            429 => {}
            other => panic!("search answered {other}: {response:#?}"),
        }
    }
    passed
}

/// A 401 as the admin routes answer it: a Bearer challenge and a small
/// JSON error that does not echo the token.
fn assert_unauthorized(response: &Response, case: &str) {
    assert_eq!(response.status, 401, "{case}: {response:#?}");
    let challenge = response.header("www-authenticate");
    assert!(challenge.starts_with("Bearer "), "{case}: {challenge}");
    assert_eq!(
        response.header("content-type"),
        "application/json",
        "{case}"
    );
    assert!(
        response.body.starts_with(r#"{"error":"#),
        "{case}: {}",
        response.body
    );
    assert!(!response.body.contains(TOKEN), "{case}: {}", response.body);
}

#[tokio::test]
async fn without_limiter_admin_token_the_admin_route_does_not_exist() {
    let server = UgcServer::start(&[("LIMITER_TRUSTED_PROXIES", "127.0.0.1")]);
    let addr = server.addr();
    let no_header = put_plan(addr, "k1", "pro", &[]).await;
    assert_eq!(no_header.status, 404, "{no_header:#?}");
    let with_header = put_plan_as(addr, "k1", "pro", &bearer(TOKEN)).await;
    assert_eq!(with_header.status, 404, "{with_header:#?}");
    // From loopback with a forwarded loopback client: still no route.
    let headers: [(&str, &[u8]); 1] = [("x-forwarded-for", b"127.0.0.1")];
    assert_eq!(put_plan(addr, "k1", "pro", &headers).await.status, 404);
    // The key kept the plan free.
    assert_eq!(searches_passed(addr, "k1", FREE + 10).await, FREE);
    assert_eq!(server.logged("no admin routes"), 1);
}

#[tokio::test]
async fn a_missing_wrong_or_malformed_token_gets_401_and_changes_nothing() {
    let server = UgcServer::start(&[("LIMITER_ADMIN_TOKEN", TOKEN)]);
    let addr = server.addr();
    let mut clients = fresh_clients();

    let missing = put_plan_from(clients.next().unwrap(), addr, "k1", "pro", &[]).await;
    assert_unauthorized(&missing, "missing");
    assert_eq!(
        missing.header("www-authenticate"),
        r#"Bearer realm="admin""#
    );

    // Same length, last character changed; same length, first changed.
    let mut last_wrong = TOKEN.to_owned();
    last_wrong.pop();
    last_wrong.push('!');
    let first_wrong = format!("S{}", &TOKEN[1..]);
    assert_eq!(last_wrong.len(), TOKEN.len());
    assert_eq!(first_wrong.len(), TOKEN.len());
    let mut non_utf8 = b"Bearer ".to_vec();
    non_utf8.extend_from_slice(TOKEN.as_bytes());
    non_utf8.extend_from_slice(&[0xff, 0xfe]);
    let invalid: Vec<(&str, Vec<u8>)> = vec![
        ("wrong token", bearer("not-the-token")),
        ("right length, wrong last byte", bearer(&last_wrong)),
        ("right length, wrong first byte", bearer(&first_wrong)),
        ("other case", bearer(&TOKEN.to_uppercase())),
        ("a prefix", bearer(&TOKEN[..TOKEN.len() - 1])),
        ("one byte more", bearer(&format!("{TOKEN}x"))),
        ("a word more", bearer(&format!("{TOKEN} x"))),
        ("empty token", b"Bearer ".to_vec()),
        ("scheme only", b"Bearer".to_vec()),
        ("no space", format!("Bearer{TOKEN}").into_bytes()),
        ("tab", format!("Bearer\t{TOKEN}").into_bytes()),
        ("no scheme", TOKEN.as_bytes().to_vec()),
        ("basic", format!("Basic {TOKEN}").into_bytes()),
        ("non-UTF-8", non_utf8),
    ];
    for (case, authorization) in &invalid {
        let headers: [(&str, &[u8]); 1] = [("authorization", authorization)];
        let response = put_plan_from(clients.next().unwrap(), addr, "k1", "pro", &headers).await;
        assert_unauthorized(&response, case);
        assert_eq!(
            response.header("www-authenticate"),
            r#"Bearer realm="admin", error="invalid_token""#,
            "{case}"
        );
    }
    // Two Authorization headers, even both right: which one counts would
    // depend on who reads them.
    for second in [bearer("not-the-token"), bearer(TOKEN)] {
        let headers: [(&str, &[u8]); 2] = [
            ("authorization", &bearer(TOKEN)),
            ("authorization", &second),
        ];
        let response = put_plan_from(clients.next().unwrap(), addr, "k1", "pro", &headers).await;
        assert_unauthorized(&response, "twice");
    }
    // The token is checked before the body: a bad body is 401 too.
    let response = put_plan_from(clients.next().unwrap(), addr, "k1", "gold", &[]).await;
    assert_unauthorized(&response, "bad body");
    // Paths that match no admin route stay 404, with or without a token.
    for headers in [vec![], vec![("authorization", bearer(TOKEN))]] {
        let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        let response = send(addr, "PUT", "/admin/nothing/k1", &headers, b"pro")
            .await
            .unwrap();
        assert_eq!(response.status, 404, "{response:#?}");
    }
    // Nothing changed: k1 is still free.
    assert_eq!(searches_passed(addr, "k1", FREE + 10).await, FREE);
    assert_eq!(server.logged("admin routes mounted"), 1);
    assert_eq!(server.logged(TOKEN), 0, "the token is never logged");
}

#[tokio::test]
async fn the_right_token_changes_the_plan() {
    let server = UgcServer::start(&[("LIMITER_ADMIN_TOKEN", TOKEN)]);
    let addr = server.addr();
    let set = put_plan_as(addr, "k1", "pro", &bearer(TOKEN)).await;
    assert_eq!(set.status, 200, "{set:#?}");
    assert_eq!(set.body, r#"{"key":"k1","plan":"pro"}"#);
    assert_eq!(searches_passed(addr, "k1", PRO + 10).await, PRO);
    // The scheme in any case, and any number of spaces before the token.
    for (key, authorization) in [
        ("k2", format!("bearer {TOKEN}")),
        ("k3", format!("BEARER   {TOKEN}")),
    ] {
        let set = put_plan_as(addr, key, "pro\n", authorization.as_bytes()).await;
        assert_eq!(set.status, 200, "{authorization}: {set:#?}");
        assert_eq!(set.body, format!(r#"{{"key":"{key}","plan":"pro"}}"#));
    }
    assert_eq!(searches_passed(addr, "k2", PRO + 1).await, PRO);
    // A bad body with the right token: 400, as before.
    let bad = put_plan_as(addr, "k4", "gold", &bearer(TOKEN)).await;
    assert_eq!(bad.status, 400, "{bad:#?}");
    assert_eq!(searches_passed(addr, "k4", FREE + 1).await, FREE);
}

#[tokio::test]
async fn through_a_trusted_proxy_a_client_without_the_token_gets_401() {
    // nginx on the same host: every peer is 127.0.0.1, the client in the
    // forwarding header, and it may forge that header to look local.
    let server = UgcServer::start(&[
        ("LIMITER_TRUSTED_PROXIES", "127.0.0.1"),
        ("LIMITER_ADMIN_TOKEN", TOKEN),
    ]);
    let addr = server.addr();
    let forwarded: [&[(&str, &[u8])]; 5] = [
        &[("x-forwarded-for", b"198.51.100.7")],
        &[("x-forwarded-for", b"127.0.0.1")],
        &[("x-forwarded-for", b"127.0.0.1, 127.0.0.1")],
        &[("x-forwarded-for", b"::1"), ("x-real-ip", b"127.0.0.1")],
        &[
            ("forwarded", b"for=127.0.0.1"),
            ("x-forwarded-for", b"127.0.0.1"),
        ],
    ];
    for headers in forwarded {
        let response = put_plan(addr, "k1", "pro", headers).await;
        assert_unauthorized(&response, &format!("{headers:?}"));
        let mut with_wrong_token = headers.to_vec();
        let wrong = bearer("not-the-token");
        with_wrong_token.push(("authorization", &wrong));
        let response = put_plan(addr, "k1", "pro", &with_wrong_token).await;
        assert_unauthorized(&response, &format!("{with_wrong_token:?}"));
    }
    // The plan is unchanged: exactly 10 searches in the window.
    assert_eq!(searches_passed(addr, "k1", FREE + 10).await, FREE);
    // The admin, through the same proxy, with the token.
    let mut headers: Vec<(&str, &[u8])> = vec![("x-forwarded-for", b"198.51.100.9")];
    let authorization = bearer(TOKEN);
    headers.push(("authorization", &authorization));
    assert_eq!(put_plan(addr, "k2", "pro", &headers).await.status, 200);
    assert_eq!(searches_passed(addr, "k2", PRO + 1).await, PRO);
}

#[tokio::test]
async fn an_empty_or_unsendable_admin_token_stops_the_ugc_binary_at_start_up() {
    let log = ugc_start_up_error(&[("LIMITER_ADMIN_TOKEN", "")]);
    assert!(
        log.contains("LIMITER_ADMIN_TOKEN: the admin token is empty"),
        "{log}"
    );
    let log = ugc_start_up_error(&[("LIMITER_ADMIN_TOKEN", "two words")]);
    assert!(
        log.contains(
            "LIMITER_ADMIN_TOKEN: the admin token must be visible ASCII characters without spaces"
        ),
        "{log}"
    );
    assert!(!log.contains("two words"), "{log}");
}

#[test]
fn the_admin_token_is_never_printed() {
    let options = Options {
        admin_token: Some(AdminToken::new(TOKEN).unwrap()),
        ..Options::default()
    };
    let debug = format!("{options:?}");
    assert!(debug.contains("AdminToken(<redacted>)"), "{debug}");
    assert!(!debug.contains(TOKEN), "{debug}");
}

#[tokio::test]
async fn a_full_plan_table_refuses_new_keys_with_507() {
    const MAX: usize = 3;
    let table = PlanTable::with_max_keys(MAX);
    let limiter = Limiter::new(MemoryStore::with_clock(ManualClock::new(T0)));
    let options = Options {
        plans: table.clone(),
        admin_token: Some(AdminToken::new(TOKEN).unwrap()),
        ..Options::default()
    };
    let addr = serve(app(limiter, options)).await;
    let auth = bearer(TOKEN);
    let set = |key: &'static str, plan: &'static str| {
        let auth = auth.clone();
        async move { put_plan_as(addr, key, plan, &auth).await }
    };
    for key in ["k0", "k1", "k2"] {
        assert_eq!(set(key, "pro").await.status, 200, "{key}");
    }
    assert_eq!(table.len(), MAX);

    // The (n+1)th distinct key: refused, not applied.
    let full = set("k3", "pro").await;
    assert_eq!(full.status, 507, "{full:#?}");
    assert_eq!(full.header("content-type"), "application/json");
    assert_eq!(
        full.body,
        r#"{"error":"the plan table is full: it holds 3 keys with a plan other than `free`; set one to `free` to make room","held":3}"#
    );
    assert_eq!(table.len(), MAX);
    assert_eq!(searches_passed(addr, "k3", FREE + 1).await, FREE);

    // A key it holds can still be changed; `free` for a key it does not
    // hold takes no room.
    assert_eq!(set("k0", "pro").await.status, 200);
    assert_eq!(set("k3", "free").await.status, 200);
    assert_eq!(table.len(), MAX);
    // Resetting one to free makes room for another.
    let reset = set("k1", "free").await;
    assert_eq!(reset.status, 200, "{reset:#?}");
    assert_eq!(reset.body, r#"{"key":"k1","plan":"free"}"#);
    assert_eq!(table.len(), MAX - 1);
    assert_eq!(set("k4", "pro").await.status, 200);
    assert_eq!(table.len(), MAX);
    assert_eq!(set("k5", "pro").await.status, 507);
    assert_eq!(table.len(), MAX);

    // What the table holds is what the searches get.
    assert_eq!(searches_passed(addr, "k4", PRO + 1).await, PRO);
    assert_eq!(searches_passed(addr, "k1", FREE + 1).await, FREE);
    assert_eq!(searches_passed(addr, "k5", FREE + 1).await, FREE);
    assert_eq!(searches_passed(addr, "k0", PRO + 1).await, PRO);
}

#[test]
fn the_default_plan_table_holds_at_most_100_000_keys() {
    let table = PlanTable::new();
    assert_eq!(table.max_keys(), MAX_ASSIGNED_KEYS);
    assert_eq!(MAX_ASSIGNED_KEYS, 100_000);
    for i in 0..MAX_ASSIGNED_KEYS {
        assert_eq!(table.set(&format!("key-{i}"), "pro"), Ok(()), "key-{i}");
    }
    assert_eq!(table.len(), MAX_ASSIGNED_KEYS);
    // A distinct key more: refused, and the table is unchanged.
    assert_eq!(
        table.set("one-more", "pro"),
        Err(SetPlanError::Full {
            held: MAX_ASSIGNED_KEYS
        })
    );
    assert_eq!(table.len(), MAX_ASSIGNED_KEYS);
    assert_eq!(table.plan_of_key("one-more").unwrap().name(), "free");
    // `free` takes no room; an unknown plan is refused as before.
    assert_eq!(table.set("one-more", "free"), Ok(()));
    assert_eq!(table.set("key-0", "gold"), Err(SetPlanError::UnknownPlan));
    assert_eq!(table.plan_of_key("key-0").unwrap().name(), "pro");
    assert_eq!(table.len(), MAX_ASSIGNED_KEYS);
}
