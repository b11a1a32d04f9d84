//! Failovers with real processes: Redis Sentinel promoting a replica (on
//! request, and after the primary is killed), and a primary demoted behind
//! a name that moves to the new one. Decisions follow the primary; none is
//! made on a node that is no longer it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use limiter_core::{
    BreakerState, GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Store, Verdict,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisSentinel, RedisServer, until};

const SERVICE: &str = RedisSentinel::SERVICE;
/// Generous for a loaded test machine: these tests count decisions, not time.
const DEADLINE: Duration = Duration::from_millis(500);

/// 100 per 10 minutes: no entry leaves the window while a test runs.
fn hundred() -> Policy {
    Policy::sliding_log([Rule::new(100, Duration::from_secs(600)).unwrap()]).unwrap()
}

fn config() -> RedisConfig {
    RedisConfig::new().response_timeout(DEADLINE)
}

/// Waits until the replica acknowledged every write the primary took.
fn replicated(primary: &RedisServer) {
    assert_eq!(primary.command(&["WAIT", "1", "5000"]).trim(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_failover_moves_every_decision_to_the_new_primary() {
    let deployment = RedisSentinel::start(1);
    let (old, new) = (&deployment.nodes[0], &deployment.nodes[1]);
    let urls = deployment.sentinel_urls();
    let store = RedisStore::connect_sentinel(urls.iter().map(String::as_str), SERVICE, config())
        .await
        .unwrap();
    let key = Key::from("k");
    for _ in 0..100 {
        assert!(store.check(&key, &hundred(), 1).await.unwrap().allowed());
    }
    replicated(old);

    deployment.sentinels[0].command(&["SENTINEL", "FAILOVER", SERVICE]);
    let started = Instant::now();
    // Both nodes hold the whole log: whichever decides, every request is
    // denied. Checks go on until the new primary has decided one.
    // The old primary would go on taking writes until the Sentinel turns
    // it into a replica, 10 s later: the store leaves it well before.
    let mut failed = 0;
    let took = until(
        started,
        Duration::from_secs(5),
        Duration::from_millis(10),
        || "the new primary did not decide within 5 s".into(),
        async || {
            if new.command_calls("evalsha").succeeded() > 0 {
                return true;
            }
            match store.check(&key, &hundred(), 1).await {
                Ok(decision) => assert!(!decision.allowed()),
                Err(_) => failed += 1,
            }
            false
        },
    )
    .await;
    println!(
        "decided by the new primary {took:?} after the failover began ({failed} calls failed meanwhile)"
    );

    // From now on every decision is the new primary's, none the old one's.
    let (on_old, on_new) = (old.command_calls("evalsha"), new.command_calls("evalsha"));
    for _ in 0..50 {
        let decision = store.check(&key, &hundred(), 1).await.unwrap();
        assert!(!decision.allowed());
    }
    assert_eq!(old.command_calls("evalsha"), on_old);
    assert_eq!(
        new.command_calls("evalsha").succeeded(),
        on_new.succeeded() + 50
    );
    assert_eq!(deployment.named_primary(), Some(1));

    // Dropped, the store leaves no connection to the Sentinel behind (its
    // watcher stops): the Sentinel's one client is the one asking.
    let sentinel = &deployment.sentinels[0];
    let clients = || {
        sentinel
            .command(&["INFO", "clients"])
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .map(|n| n.trim().to_owned())
    };
    assert_ne!(clients().as_deref(), Some("1"));
    drop(store);
    until(
        Instant::now(),
        Duration::from_secs(5),
        Duration::from_millis(20),
        || format!("connections left: {:?}", clients()),
        async || clients().as_deref() == Some("1"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_replaced_and_its_empty_restart_never_decides() {
    let mut deployment = RedisSentinel::start(1);
    let urls = deployment.sentinel_urls();
    let store =
        RedisStore::open_sentinel_with(urls.iter().map(String::as_str), SERVICE, config()).unwrap();
    let guarded = Guarded::new(
        store,
        GuardConfig {
            deadline: DEADLINE,
            ..GuardConfig::default()
        },
    );
    let (policy, key) = (hundred(), Key::from("k"));
    let check = || guarded.check_with(&key, &policy, 1, OnStoreError::default());
    let mut admitted_by_redis = 0;
    for _ in 0..60 {
        let verdict = check().await.unwrap();
        assert!(matches!(verdict, Verdict::Store(d) if d.allowed()));
        admitted_by_redis += 1;
    }
    replicated(&deployment.nodes[0]);

    deployment.nodes[0].kill();
    // The fallback decides until the Sentinel has promoted the replica and
    // the breaker's probe finds it.
    let took = until(
        Instant::now(),
        Duration::from_secs(15),
        Duration::from_millis(10),
        || "Redis did not decide again within 15 s of the kill".into(),
        async || match check().await.unwrap() {
            Verdict::Store(decision) => {
                admitted_by_redis += usize::from(decision.allowed());
                true
            }
            Verdict::Fallback(_) => false,
            other => panic!("{other:?}"),
        },
    )
    .await;
    println!("decided by Redis again {took:?} after the kill");
    assert_eq!(guarded.breaker_state(), BreakerState::Closed);
    assert_eq!(deployment.named_primary(), Some(1));

    // The old primary comes back empty and calls itself the primary (until
    // the Sentinel turns it into a replica): deciding there would admit the
    // whole limit again. The store stays with the Sentinel's primary.
    deployment.nodes[0].restart();
    for _ in 0..100 {
        match check().await.unwrap() {
            Verdict::Store(decision) => admitted_by_redis += usize::from(decision.allowed()),
            Verdict::Cached(decision) => assert!(!decision.allowed()),
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(admitted_by_redis, 100);
    assert_eq!(deployment.nodes[0].command_calls("evalsha").calls, 0);
}

/// A TCP endpoint that forwards new connections to a port that can change,
/// as a DNS name that a managed Redis moves to the new primary on failover;
/// connections already open stay where they are.
struct MovingName {
    port: u16,
    target: Arc<AtomicU16>,
    task: tokio::task::JoinHandle<()>,
}

impl MovingName {
    async fn to(target: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Arc::new(AtomicU16::new(target));
        let current = Arc::clone(&target);
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let port = current.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut server) =
                        tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self { port, target, task }
    }

    fn move_to(&self, target: u16) {
        self.target.store(target, Ordering::SeqCst);
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for MovingName {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_demoted_behind_its_name_answers_readonly_and_is_left_at_once() {
    let old = RedisServer::start();
    let new = RedisServer::start_with(&["--replicaof", "127.0.0.1", &old.port().to_string()]);
    let name = MovingName::to(old.port()).await;
    let store = RedisStore::connect_with(&name.url(), config())
        .await
        .unwrap();
    let ten = Policy::sliding_log([Rule::new(10, Duration::from_secs(600)).unwrap()]).unwrap();
    let key = Key::from("k");
    for _ in 0..5 {
        assert!(store.check(&key, &ten, 1).await.unwrap().allowed());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !new
        .command(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica did not sync");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    replicated(&old);

    // A failover as a managed Redis performs it: the replica is promoted,
    // the name moves to it, the old primary becomes its replica.
    let port = new.port().to_string();
    assert_eq!(new.command(&["REPLICAOF", "NO", "ONE"]).trim(), "OK");
    name.move_to(new.port());
    assert_eq!(old.command(&["REPLICAOF", "127.0.0.1", &port]).trim(), "OK");
    let on_old = old.command_calls("evalsha");

    // The store's connection still leads to the old node, which refuses the
    // script (READONLY) before running it: the store connects again, through
    // the name, and the same call is decided by the new primary.
    let mut allowed = 0;
    for _ in 0..10 {
        let decision = store.check(&key, &ten, 1).await.unwrap();
        allowed += usize::from(decision.allowed());
    }
    assert_eq!(allowed, 5);
    let after = old.command_calls("evalsha");
    assert_eq!(
        (after.calls, after.rejected),
        (on_old.calls, on_old.rejected + 1),
        "one call refused by the old primary, none run there"
    );
    assert_eq!(new.command_calls("evalsha").succeeded(), 10);
}
