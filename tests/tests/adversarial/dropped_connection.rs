//! A connection that Redis closed while Redis itself stays up (an idle
//! timeout, a restart between requests, `CLIENT KILL`) must not hand a
//! single decision to the failure policy: a command that certainly never
//! reached Redis (its connection was known dead before it was written) is
//! sent again on a fresh connection, within the same deadline. A command
//! that may have run (in flight when the connection dropped) is never sent
//! again.
//!
//! Each test checks a sliding log of 10 per 60 s through a guarded Redis
//! store (the default failure policy: a local fallback with the same rules)
//! and reads every verdict: exactly 10 admitted, every one by Redis.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use limiter_core::{GuardConfig, Guarded, Key, OnStoreError, Policy, Rule, Store, Verdict};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Generous for a loaded 2-core machine: what is tested here fails at
/// once (a closed socket), never by a deadline.
const DEADLINE: Duration = Duration::from_secs(1);
const LIMIT: u64 = 10;
const CHECKS: usize = 20;

fn ten_a_minute() -> Policy {
    Policy::sliding_log([Rule::new(LIMIT, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// One app instance: a Redis store guarded with the default failure
/// policy (fallback) and breaker. Without the deny cache, so that every
/// check, denials too, goes to Redis (over a connection that may have been
/// closed).
fn instance(url: &str) -> Guarded<RedisStore> {
    let redis = RedisStore::open_with(url, RedisConfig::new().response_timeout(DEADLINE)).unwrap();
    Guarded::new(
        redis,
        GuardConfig {
            deadline: DEADLINE,
            deny_cache_capacity: 0,
            ..GuardConfig::default()
        },
    )
}

/// Who decided the checks of a run, and how many passed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    admitted: usize,
    /// By Redis (or the deny cache remembering a denial of Redis, were it on).
    redis: usize,
    /// By the local fallback: the store call failed.
    fallback: usize,
}

impl Tally {
    fn add(&mut self, verdict: Verdict) {
        self.admitted += usize::from(verdict.allowed());
        match verdict {
            Verdict::Store(_) | Verdict::Cached(_) => self.redis += 1,
            Verdict::Fallback(_) => self.fallback += 1,
            other => panic!("the default policy falls back, never {other:?}"),
        }
    }

    /// Exactly the limit passed, and Redis decided every check.
    fn assert_exact(&self, what: &str) {
        assert_eq!(
            *self,
            Tally {
                admitted: LIMIT as usize,
                redis: CHECKS,
                fallback: 0,
            },
            "{what}: {CHECKS} checks of a limit of {LIMIT} must admit exactly {LIMIT}, \
             every one decided by Redis"
        );
    }
}

async fn check(store: &Guarded<RedisStore>, key: &str) -> Verdict {
    store
        .check_with(&Key::from(key), &ten_a_minute(), 1, OnStoreError::default())
        .await
        .expect("the failure policy always decides")
}

/// A check decided by Redis, so the instance holds a live connection.
async fn connect(store: &Guarded<RedisStore>) {
    assert!(matches!(check(store, "warm-up").await, Verdict::Store(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_by_the_servers_idle_timeout_is_made_afresh() {
    let server = RedisServer::start_with(&["--timeout", "1"]);
    let store = instance(&server.url());
    connect(&store).await;
    // Redis closes connections idle for more than a second (checked ten
    // times a second by its cron).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut tally = Tally::default();
    for _ in 0..CHECKS {
        tally.add(check(&store, "idle").await);
    }
    println!("after an idle timeout: {tally:?}");
    tally.assert_exact("after the server closed the idle connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_keep_counting_in_redis_after_it_restarts_between_requests() {
    let mut server = RedisServer::start();
    let instances = [instance(&server.url()), instance(&server.url())];
    for store in &instances {
        connect(store).await;
    }
    // Back at once, empty: nothing happens to either instance meanwhile
    // but its connection being closed.
    server.restart();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut tally = Tally::default();
    for i in 0..CHECKS {
        tally.add(check(&instances[i % 2], "restarted").await);
    }
    println!("after a restart: {tally:?}");
    tally.assert_exact("two instances after a restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_before_every_request_is_made_afresh_each_time() {
    let server = RedisServer::start();
    let store = instance(&server.url());
    connect(&store).await;
    let mut tally = Tally::default();
    let mut killed = Vec::new();
    for _ in 0..CHECKS {
        // Every client but redis-cli itself (SKIPME yes is the default).
        let reply = server.command(&["CLIENT", "KILL", "TYPE", "normal"]);
        killed.push(
            reply
                .trim()
                .parse::<usize>()
                .expect("the number of clients killed"),
        );
        // Long enough for the instance to read the close.
        tokio::time::sleep(Duration::from_millis(20)).await;
        tally.add(check(&store, "killed").await);
    }
    println!("with CLIENT KILL before each request: {tally:?}, connections killed {killed:?}");
    tally.assert_exact("a connection killed before each request");
    // Each check left the connection it made for the next kill.
    assert!(
        killed.iter().all(|&k| k >= 1),
        "a check found no connection to kill: {killed:?}"
    );
}

/// A TCP proxy to Redis that holds every reply for `reply_delay` and can
/// cut every connection it carries at once while still taking new ones.
struct SeveringProxy {
    addr: SocketAddr,
    connections: Arc<Mutex<JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl SeveringProxy {
    async fn start(target: SocketAddr, reply_delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let carried = Arc::clone(&connections);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                carried
                    .lock()
                    .unwrap()
                    .spawn(forward(client, target, reply_delay));
            }
        });
        Self {
            addr,
            connections,
            accept,
        }
    }

    fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// Closes every connection carried so far, both ways, dropping what
    /// it holds.
    fn sever(&self) {
        self.connections.lock().unwrap().abort_all();
    }
}

impl Drop for SeveringProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.sever();
    }
}

async fn forward(client: TcpStream, target: SocketAddr, reply_delay: Duration) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = async move {
        let mut buffer = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = client_read.read(&mut buffer).await {
            if server_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
    };
    let replies = async move {
        let mut buffer = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = server_read.read(&mut buffer).await {
            tokio::time::sleep(reply_delay).await;
            if client_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(requests, replies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_in_flight_when_its_connection_drops_is_never_sent_again() {
    let server = RedisServer::start();
    let target = ([127, 0, 0, 1], server.port()).into();
    // Replies come 200 ms late: the connection is cut while the script has
    // run but before its reply is back.
    let proxy = SeveringProxy::start(target, Duration::from_millis(200)).await;
    let store = instance(&proxy.url());
    let direct = instance(&server.url());
    // The script loaded (scripts are the server's), so the instance's
    // calls through the proxy are one round trip each.
    connect(&direct).await;
    connect(&store).await;
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    let key = "in-flight";
    let in_flight = {
        let store = store.clone();
        tokio::spawn(async move { check(&store, key).await })
    };
    // Cut the connection as soon as Redis has run the script (its key
    // exists), its reply still held by the proxy.
    let started = Instant::now();
    loop {
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut raw)
            .await
            .unwrap();
        if exists {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the check never reached Redis"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    proxy.sever();
    let verdict = in_flight.await.unwrap();
    // The connection dropped with the call in flight: it may have run (it
    // did), so it is not sent again and the fallback decides it.
    assert!(
        matches!(verdict, Verdict::Fallback(d) if d.allowed()),
        "{verdict:?}"
    );
    // Redis counted the request once: the next check, straight to Redis,
    // is its second.
    let next = direct
        .check(&Key::from(key), &ten_a_minute(), 1)
        .await
        .unwrap();
    assert_eq!(
        next.remaining(),
        LIMIT - 2,
        "the request in flight ran {} times on Redis",
        LIMIT - next.remaining() - 1
    );
}
