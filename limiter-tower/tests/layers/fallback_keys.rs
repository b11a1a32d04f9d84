//! A limit per user when signed in, per address otherwise
//! (`KeySource::user_or_ip`), and a custom key falling back on the client
//! address as `by = ip` finds it (`ClientAddress`).

use std::time::Duration;

use axum::http::request::Parts;
use limiter_tower::{ClientAddress, Identity, KeySource, LimitLayer, Policy, Rule};

use crate::common::{app, user_of};

fn two_a_minute(source: KeySource) -> LimitLayer {
    let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60)).unwrap()]).unwrap();
    LimitLayer::new("comments", policy, source)
}

#[tokio::test]
async fn a_signed_in_request_counts_as_its_user_and_any_other_as_its_address() {
    let limit = two_a_minute(KeySource::user_or_ip());
    let control_limit = limit.clone();
    let app = app(limit, |layer| layer.user(user_of));
    let alice = [("x-user-id", "alice")];
    let mut statuses = Vec::new();
    // Alice from two addresses: one count, hers.
    for from in ["203.0.113.7", "203.0.113.7", "198.51.100.1"] {
        statuses.push(app.send(from, &alice).await.status().as_u16());
    }
    // Nobody signed in, from the address alice used first: its own count.
    for _ in 0..3 {
        statuses.push(app.send("203.0.113.7", &[]).await.status().as_u16());
    }
    // A user named like that address is a user: a count of its own.
    let named_like = [("x-user-id", "198.51.100.1")];
    statuses.push(
        app.send("198.51.100.2", &named_like)
            .await
            .status()
            .as_u16(),
    );
    assert_eq!(statuses, [200, 200, 429, 200, 200, 429, 200]);
    // The handle answers for either kind, as the route counted it.
    let control = app.control.clone().limit("GET /r", &control_limit);
    for identity in [
        Identity::user("alice"),
        Identity::ip("203.0.113.7".parse().unwrap()),
    ] {
        let states = control.limits(&identity).await.unwrap();
        let remaining: Vec<u64> = states.iter().map(|s| s.remaining).collect();
        assert_eq!(remaining, [0], "{identity:?}");
    }
    let unused = Identity::ip("198.51.100.1".parse().unwrap());
    let states = control.limits(&unused).await.unwrap();
    assert_eq!(states.iter().map(|s| s.remaining).collect::<Vec<_>>(), [2]);
}

/// The API key when there is one, else the client address.
fn key_or_address(parts: &Parts) -> Option<String> {
    match parts.headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(key) => Some(format!("key:{key}")),
        None => parts
            .extensions
            .get::<ClientAddress>()
            .map(|a| format!("ip:{}", a.0)),
    }
}

#[tokio::test]
async fn a_custom_key_reads_the_client_address_found_through_the_proxies() {
    let app = app(two_a_minute(KeySource::custom(key_or_address)), |layer| {
        layer
    });
    let from_client = |client: &'static str| [("x-forwarded-for", client)];
    let mut statuses = Vec::new();
    // Two clients behind the trusted proxy 10.0.0.1: counted apart.
    for client in [
        "198.51.100.7",
        "198.51.100.7",
        "198.51.100.7",
        "198.51.100.8",
    ] {
        statuses.push(
            app.send("10.0.0.1", &from_client(client))
                .await
                .status()
                .as_u16(),
        );
    }
    // A key: its own count, wherever it comes from.
    let keyed = [("x-api-key", "k1"), ("x-forwarded-for", "198.51.100.7")];
    statuses.push(app.send("10.0.0.1", &keyed).await.status().as_u16());
    assert_eq!(statuses, [200, 200, 429, 200, 200]);
}
