//! One `ugc` process of the scenario, and the requests the test sends it.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use limiter_tests::UgcServer;
use limiter_tests::http::{Response, send};
use serde_json::{Value, json};

use super::{ADMIN_NETWORK, BLOCK_SECONDS, DEADLINE_MS, TOKEN, VICTIM};

/// Whether the admin requests' addresses ([`ADMIN_NETWORK`]) are on the
/// allow list (`LIMITER_ALLOW`), which spares them the admin throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admins {
    Allowed,
    Throttled,
}

/// A `ugc` process on the shared Redis, with the admin token.
pub(super) struct Instance {
    server: UgcServer,
}

impl Instance {
    pub(super) fn start(url: &str, admins: Admins) -> Self {
        let mut env = vec![
            ("REDIS_URL", url),
            ("LIMITER_STORE_DEADLINE_MS", DEADLINE_MS),
            ("LIMITER_ADMIN_TOKEN", TOKEN),
        ];
        if admins == Admins::Allowed {
            env.push(("LIMITER_ALLOW", ADMIN_NETWORK));
        }
        Self {
            server: UgcServer::start(&env),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// A request to an admin route, with the token, from an address no
    /// admin request came from before (see [`admin_address`]).
    pub(super) async fn admin(&self, method: &str, path: &str, body: &str) -> Response {
        let from = Some(admin_address());
        limiter_tests::http::admin(self.addr(), from, method, path, body, Some(TOKEN)).await
    }

    /// `PUT /admin/blocks/user/{user}` for `seconds`.
    pub(super) async fn block(&self, user: &str, seconds: u64) -> Response {
        let body = json!({ "seconds": seconds }).to_string();
        self.admin("PUT", &format!("/admin/blocks/user/{user}"), &body)
            .await
    }

    /// `PUT /admin/plans/{key}` with the plan's name as the body.
    pub(super) async fn assign(&self, key: &str, plan: &str) -> Response {
        self.admin("PUT", &format!("/admin/plans/{key}"), plan)
            .await
    }

    /// The seconds left of `user`'s block, as `GET /admin/blocks/user/{user}`
    /// answers (200 `{"seconds": N}`); `None` for 404.
    pub(super) async fn blocked(&self, user: &str) -> Option<u64> {
        let path = format!("/admin/blocks/user/{user}");
        let response = self.admin("GET", &path, "").await;
        limiter_tests::http::block_seconds(&path, &response)
    }

    /// `POST /posts/1/replies` as `user`.
    pub(super) async fn reply(&self, user: &str) -> Response {
        let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
        send(self.addr(), "POST", "/posts/1/replies", &headers, b"")
            .await
            .unwrap()
    }

    /// The searches a minute `key` gets (its plan's `q`), from the
    /// `RateLimit-Policy` of one `GET /search` it sends.
    pub(super) async fn searches_a_minute(&self, key: &str) -> i64 {
        let headers: [(&str, &[u8]); 1] = [("x-api-key", key.as_bytes())];
        let response = send(self.addr(), "GET", "/search", &headers, b"")
            .await
            .unwrap();
        assert_eq!(response.status, 200, "{response:#?}");
        let policy = response.rate_limit_field("ratelimit-policy");
        assert_eq!(policy.len(), 1, "{response:#?}");
        policy[0].1["q"]
    }

    /// The victim is blocked here: the block answered 200 with at most the
    /// 600 s asked for, and a reply answered 429 of type blocked whose
    /// `Retry-After` is at most that too.
    pub(super) async fn assert_victim_blocked(&self, name: &str) {
        let left = self.blocked(VICTIM).await;
        assert!(
            left.is_some_and(|left| (1..=BLOCK_SECONDS).contains(&left)),
            "{name}: {left:?}"
        );
        let reply = self.reply(VICTIM).await;
        assert_eq!(reply.status, 429, "{name}: {reply:#?}");
        assert!(
            !reply.headers.contains_key("ratelimit"),
            "{name}: {reply:#?}"
        );
        let problem: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(
            problem["type"],
            limiter_tower::BLOCKED,
            "{name}: {reply:#?}"
        );
        let retry_after: u64 = reply.header("retry-after").parse().unwrap();
        assert!(
            (1..=BLOCK_SECONDS).contains(&retry_after),
            "{name}: {reply:#?}"
        );
    }

    /// The victim is not blocked here: 404 for the block, 201 for a reply.
    pub(super) async fn assert_victim_free(&self, name: &str) {
        assert_eq!(self.blocked(VICTIM).await, None, "{name}");
        let reply = self.reply(VICTIM).await;
        assert_eq!(reply.status, 201, "{name}: {reply:#?}");
    }
}

/// A loopback address of its own for each admin request: 127.1.0.1,
/// 127.1.0.2 and so on. The admin throttle counts per address, and while
/// the store fails (the breaker open) the failure policy counts every
/// admin request, the right token's too, and gives none back: an address
/// polling every 50 ms meanwhile would be answered 429 from its 11th
/// request on, whatever the blocks.
fn admin_address() -> IpAddr {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let [_, _, high, low] = NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes();
    IpAddr::from([127, 1, high, low])
}
