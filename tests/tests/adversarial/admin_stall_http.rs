//! An operator's change answered 503 "not confirmed" lands on every
//! instance or on none (issue 31), end to end: the red team's sequence
//! against real `ugc` processes sharing one Redis. Redis hangs (SIGSTOP)
//! while instance A is asked to block the user `victim` for 600 s and to
//! give the API key `k1` the plan `pro`; both answer 503 saying the change
//! was not confirmed, and A applies neither itself.
//!
//! When Redis resumes (SIGCONT) the calls it had read run late: within
//! 2 s, A and B answer `GET /admin/blocks/user/victim` 200 and block the
//! victim's replies, `k1` searches under `pro` on both, and an instance C
//! started afterwards agrees. When Redis is killed and restarted empty
//! instead, the calls never run: A, B and a new C answer 404 and let the
//! victim reply, and keep doing so once each has read the new server's
//! blocks.
//!
//! The two changes are sent at once: each request's admin throttle check
//! and then its change go out on A's live connection before the deadline
//! cuts any of them short (a call sent after a timeout may wait on a new
//! connection that a hung Redis never completes, and never reach it).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use limiter_tests::http::{Response, send, send_from};
use limiter_tests::{RedisServer, UgcServer};
use serde_json::{Value, json};

const TOKEN: &str = "admin-stall-http-token";
/// A's deadline for one Redis call: what a change answers within while
/// Redis hangs (its throttle check, then the change itself).
const DEADLINE_MS: &str = "500";
/// The promise: in effect on every instance or on none within 2 s of
/// Redis answering again.
const BOUND: Duration = Duration::from_secs(2);
/// How often the test looks.
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// How long a warm-up step may take on a loaded machine.
const WARM_UP: Duration = Duration::from_secs(10);

/// Where the admin requests come from (see [`admin_address`]); the users'
/// requests come from 127.0.0.1, outside it.
const ADMIN_NETWORK: &str = "127.1.0.0/16";
const VICTIM: &str = "victim";
/// The block the operator asks for, in seconds.
const BLOCK_SECONDS: u64 = 600;
/// The API key whose plan the operator changes.
const PLANNED: &str = "k1";
/// Searches a minute under the plans `free` and `pro`.
const FREE: i64 = 10;
const PRO: i64 = 100;

/// Whether the admin requests' addresses ([`ADMIN_NETWORK`]) are on the
/// allow list (`LIMITER_ALLOW`), which spares them the admin throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admins {
    Allowed,
    Throttled,
}

/// A `ugc` process on the shared Redis, with the admin token.
struct Instance {
    server: UgcServer,
}

impl Instance {
    fn start(url: &str, admins: Admins) -> Self {
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
    async fn admin(&self, method: &str, path: &str, body: &str) -> Response {
        let authorization = format!("Bearer {TOKEN}");
        let headers: [(&str, &[u8]); 1] = [("authorization", authorization.as_bytes())];
        let from = admin_address();
        send_from(from, self.addr(), method, path, &headers, body.as_bytes())
            .await
            .unwrap()
    }

    /// `PUT /admin/blocks/user/{user}` for `seconds`.
    async fn block(&self, user: &str, seconds: u64) -> Response {
        let body = json!({ "seconds": seconds }).to_string();
        self.admin("PUT", &format!("/admin/blocks/user/{user}"), &body)
            .await
    }

    /// `PUT /admin/plans/{key}` with the plan's name as the body.
    async fn assign(&self, key: &str, plan: &str) -> Response {
        self.admin("PUT", &format!("/admin/plans/{key}"), plan)
            .await
    }

    /// The seconds left of `user`'s block, as `GET /admin/blocks/user/{user}`
    /// answers (200 `{"seconds": N}`); `None` for 404.
    async fn blocked(&self, user: &str) -> Option<u64> {
        let path = format!("/admin/blocks/user/{user}");
        let response = self.admin("GET", &path, "").await;
        match response.status {
            404 => None,
            200 => {
                let body: Value = serde_json::from_str(&response.body).unwrap();
                let seconds = body["seconds"].as_u64();
                assert_eq!(body, json!({ "seconds": seconds }), "{path}");
                seconds
            }
            _ => panic!("{path}: {response:#?}"),
        }
    }

    /// `POST /posts/1/replies` as `user`.
    async fn reply(&self, user: &str) -> Response {
        let headers: [(&str, &[u8]); 1] = [("x-user-id", user.as_bytes())];
        send(self.addr(), "POST", "/posts/1/replies", &headers, b"")
            .await
            .unwrap()
    }

    /// The searches a minute `key` gets (its plan's `q`), from the
    /// `RateLimit-Policy` of one `GET /search` it sends.
    async fn searches_a_minute(&self, key: &str) -> i64 {
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
    async fn assert_victim_blocked(&self, name: &str) {
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
    async fn assert_victim_free(&self, name: &str) {
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

/// How long after `since` the first look that found `holds` true began,
/// looking every [`LOOK_EVERY`] for `within`; `None` when none did.
async fn first_true(
    since: Instant,
    within: Duration,
    mut holds: impl AsyncFnMut() -> bool,
) -> Option<Duration> {
    loop {
        let looked = since.elapsed();
        if holds().await {
            return Some(looked);
        }
        if since.elapsed() > within {
            return None;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// Waits for `holds` through a warm-up step, or fails naming it.
async fn warmed(step: &str, holds: impl AsyncFnMut() -> bool) {
    let found = first_true(Instant::now(), WARM_UP, holds).await;
    assert!(found.is_some(), "warm-up: {step}");
}

/// A block and an unblock made on A reach B, and A assigns a plan and
/// takes it back: every admin script is loaded on Redis (a script Redis
/// lacks answers NOSCRIPT, which runs nothing: there would be no late
/// write to see) and both instances have subscribed. The victim replies
/// on both: nothing blocks it yet.
async fn warm_up(a: &Instance, b: &Instance) {
    let set = a.block("warm", 60).await;
    assert_eq!(set.status, 204, "{set:#?}");
    warmed("B reads A's block", async || {
        b.blocked("warm").await.is_some()
    })
    .await;
    let unset = a.admin("DELETE", "/admin/blocks/user/warm", "").await;
    assert_eq!(unset.status, 204, "{unset:#?}");
    warmed("B reads A's unblock", async || {
        b.blocked("warm").await.is_none()
    })
    .await;
    for plan in ["pro", "free"] {
        let assigned = a.assign("warm", plan).await;
        assert_eq!(assigned.status, 200, "{plan}: {assigned:#?}");
    }
    for (name, instance) in [("A", a), ("B", b)] {
        instance.assert_victim_free(name).await;
        assert_eq!(instance.searches_a_minute(PLANNED).await, FREE, "{name}");
    }
}

/// While Redis hangs, A's block of the victim and plan for `k1`, sent at
/// once, answer 503 saying they were not confirmed, and A applies neither
/// itself.
async fn change_while_hung(a: &Instance) {
    let (block, plan) = tokio::join!(a.block(VICTIM, BLOCK_SECONDS), a.assign(PLANNED, "pro"));
    assert_eq!(block.status, 503, "{block:#?}");
    assert_eq!(
        block.header("content-type"),
        "application/problem+json",
        "{block:#?}"
    );
    let problem: Value = serde_json::from_str(&block.body).unwrap();
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("not confirmed"), "{block:#?}");
    assert_eq!(plan.status, 503, "{plan:#?}");
    let error: Value = serde_json::from_str(&plan.body).unwrap();
    let error = error["error"].as_str().unwrap_or_default();
    assert!(error.contains("not confirmed"), "{plan:#?}");
    assert_eq!(a.blocked(VICTIM).await, None);
}

/// `HGET`/`HEXISTS`/`HLEN` on the hashes the Redis store keeps its
/// operator's blocks and plans in, each field an identity's key.
const BLOCKS: &str = "{limiter:resets}:blocks";
const PLANS: &str = "{limiter:resets}:plans";
/// The hash counting the operator's changes (`changes`).
const VERSION: &str = "{limiter:resets}:version";
/// The field of [`VICTIM`]'s block, and of [`PLANNED`]'s plan.
const VICTIM_KEY: &str = "rate_limit:user=victim";
const PLANNED_KEY: &str = "rate_limit:header.x-api-key=k1";

/// Redis's answer to `args`, trimmed. A command sent after SIGCONT comes
/// after whatever Redis had read while stopped: it sees those calls run.
fn redis_says(redis: &RedisServer, args: &[&str]) -> String {
    redis.command(args).trim().to_owned()
}

/// B blocks a user on Redis as it is now, and every one of `others` reads
/// that block: from then on each instance's answers come from what this
/// Redis holds, not from what it knew before.
async fn all_read_a_block_made_now(b: &Instance, others: &[&Instance]) {
    warmed("B blocks on Redis as it is now", async || {
        b.block("after", 60).await.status == 204
    })
    .await;
    for (i, other) in others.iter().enumerate() {
        warmed(&format!("instance {i} reads B's block"), async || {
            other.blocked("after").await.is_some()
        })
        .await;
    }
}

#[tokio::test]
async fn an_unconfirmed_block_that_runs_late_holds_on_every_instance_within_two_seconds() {
    let redis = RedisServer::start();
    let url = redis.url();
    let start = || Instance::start(&url, Admins::Allowed);
    let (a, b) = (start(), start());
    warm_up(&a, &b).await;

    redis.signal("STOP");
    change_while_hung(&a).await;
    redis.signal("CONT");
    let resumed = Instant::now();

    let agreed = first_true(resumed, BOUND, async || {
        a.blocked(VICTIM).await.is_some() && b.blocked(VICTIM).await.is_some()
    })
    .await;
    println!("A and B answer the block {agreed:?} after Redis resumed");
    assert!(
        agreed.is_some_and(|after| after <= BOUND + LOOK_EVERY),
        "{agreed:?}"
    );
    // Both changes ran late; the plan with the block (both were queued on
    // one connection, which Redis reads in one go), so whoever read the
    // block read the plan.
    assert_eq!(redis_says(&redis, &["HEXISTS", BLOCKS, VICTIM_KEY]), "1");
    assert_eq!(redis_says(&redis, &["HGET", PLANS, PLANNED_KEY]), "pro");
    for (name, instance) in [("A", &a), ("B", &b)] {
        instance.assert_victim_blocked(name).await;
        assert_eq!(instance.searches_a_minute(PLANNED).await, PRO, "{name}");
    }

    // An instance started now reads the same state.
    let c = start();
    warmed("C reads the block", async || {
        c.blocked(VICTIM).await.is_some()
    })
    .await;
    for (name, instance) in [("A", &a), ("B", &b), ("C", &c)] {
        instance.assert_victim_blocked(name).await;
        assert_eq!(instance.searches_a_minute(PLANNED).await, PRO, "{name}");
    }
}

#[tokio::test]
async fn an_unconfirmed_block_that_never_runs_holds_nowhere() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let start = || Instance::start(&url, Admins::Allowed);
    let (a, b) = (start(), start());
    warm_up(&a, &b).await;

    redis.signal("STOP");
    change_while_hung(&a).await;
    // The calls Redis had read die with it: the restarted server is empty.
    redis.restart();
    let restarted = Instant::now();
    let c = start();

    let agreed = first_true(restarted, BOUND, async || {
        a.blocked(VICTIM).await.is_none()
            && b.blocked(VICTIM).await.is_none()
            && c.blocked(VICTIM).await.is_none()
    })
    .await;
    println!("A, B and C answer no block {agreed:?} after Redis restarted");
    assert!(
        agreed.is_some_and(|after| after <= BOUND + LOOK_EVERY),
        "{agreed:?}"
    );
    for (name, instance) in [("A", &a), ("B", &b), ("C", &c)] {
        instance.assert_victim_free(name).await;
    }

    // No stale view: the same once each has read the new server's blocks.
    all_read_a_block_made_now(&b, &[&a, &c]).await;
    for (name, instance) in [("A", &a), ("B", &b), ("C", &c)] {
        instance.assert_victim_free(name).await;
        assert_eq!(instance.searches_a_minute(PLANNED).await, FREE, "{name}");
    }
}

/// Behind the admin throttle, each change follows its request's throttle
/// check on the same store: the check's timeout drops A's connection, and
/// the change waits on a new one that the stopped Redis never completes.
/// Neither change reaches Redis: when it resumes, every instance agrees
/// on no block and the plan `free`.
#[tokio::test]
async fn an_unconfirmed_block_behind_the_admin_throttle_never_reaches_redis_and_holds_nowhere() {
    let redis = RedisServer::start();
    let url = redis.url();
    let start = || Instance::start(&url, Admins::Throttled);
    let (a, b) = (start(), start());
    warm_up(&a, &b).await;
    let changes = redis_says(&redis, &["HGET", VERSION, "changes"]);

    redis.signal("STOP");
    change_while_hung(&a).await;
    redis.signal("CONT");
    let resumed = Instant::now();

    assert_eq!(redis_says(&redis, &["HEXISTS", BLOCKS, VICTIM_KEY]), "0");
    assert_eq!(redis_says(&redis, &["HEXISTS", PLANS, PLANNED_KEY]), "0");
    assert_eq!(redis_says(&redis, &["HGET", VERSION, "changes"]), changes);
    let agreed = first_true(resumed, BOUND, async || {
        a.blocked(VICTIM).await.is_none() && b.blocked(VICTIM).await.is_none()
    })
    .await;
    assert!(
        agreed.is_some_and(|after| after <= BOUND + LOOK_EVERY),
        "{agreed:?}"
    );
    let c = start();
    all_read_a_block_made_now(&b, &[&a, &c]).await;
    for (name, instance) in [("A", &a), ("B", &b), ("C", &c)] {
        instance.assert_victim_free(name).await;
        assert_eq!(instance.searches_a_minute(PLANNED).await, FREE, "{name}");
    }
}
