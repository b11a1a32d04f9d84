//! Concurrency limits on real Redis: at most `max` permits of a key across
//! connections and processes, given back when dropped or when their
//! acquisition is cancelled, and expiring when their holder is killed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use limiter_core::{Acquired, ConcurrencyLimit, MemoryStore, Permits};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::{RedisServer, TestRedis, redis};
use redis::AsyncCommands;
use tokio::task::JoinSet;

fn limit(max: u64, lease: Duration) -> ConcurrencyLimit {
    ConcurrencyLimit::new(max)
        .unwrap()
        .with_lease(lease)
        .unwrap()
}

/// Takes `tries` permits of `key` at once over `stores`; answers how many
/// were granted, and the permits (held until dropped).
async fn acquire_at_once<S: Permits + Clone>(
    stores: &[S],
    key: &str,
    limit: ConcurrencyLimit,
    tries: usize,
) -> Vec<Acquired> {
    let mut tasks = JoinSet::new();
    for i in 0..tries {
        let (store, key) = (stores[i % stores.len()].clone(), key.to_owned());
        tasks.spawn(async move { store.acquire_permit(&key, &limit).await.unwrap() });
    }
    tasks.join_all().await
}

fn granted(acquired: &[Acquired]) -> usize {
    acquired.iter().filter(|a| a.allowed()).count()
}

/// How many permits of `key` Redis holds.
async fn held(redis: &TestRedis, key: &str) -> u64 {
    redis.raw().await.zcard(key).await.unwrap()
}

/// Waits (at most 10 s) until Redis holds `expected` permits of `key`: a
/// permit is given back in a task of its own.
async fn until_held(redis: &TestRedis, key: &str, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while held(redis, key).await != expected {
        assert!(Instant::now() < deadline, "{key} never held {expected}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_max_permits_are_granted_on_both_stores() {
    let lease = Duration::from_secs(30);
    let memory = MemoryStore::new();
    let permits = acquire_at_once(std::slice::from_ref(&memory), "k", limit(7, lease), 200).await;
    assert_eq!(granted(&permits), 7);
    drop(permits);
    assert_eq!(memory.permits_held("k"), 0);

    let redis = redis();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(redis.store().await);
    }
    let key = redis.key("exports");
    let permits = acquire_at_once(&stores, &key, limit(7, lease), 200).await;
    assert_eq!(granted(&permits), 7);
    assert_eq!(held(&redis, &key).await, 7);
    let denied = permits.iter().find(|a| !a.allowed()).unwrap();
    assert_eq!(
        denied.decision().retry_after(),
        Some(ConcurrencyLimit::RETRY_AFTER)
    );
    assert_eq!(denied.decision().remaining(), 0);
    // The key lives as long as its last lease.
    let ttl: i64 = redis.raw().await.pttl(&key).await.unwrap();
    assert!((29_000..=30_000).contains(&ttl), "{ttl}");
    drop(permits);
    until_held(&redis, &key, 0).await;
    let again = acquire_at_once(&stores, &key, limit(7, lease), 20).await;
    assert_eq!(granted(&again), 7);
}

#[tokio::test]
async fn an_acquisition_cancelled_in_flight_gives_its_permit_back() {
    let server = RedisServer::start();
    let config = limiter_redis::RedisConfig::new().response_timeout(Duration::from_secs(30));
    let store = RedisStore::connect_with(&server.url(), config)
        .await
        .unwrap();
    let key = "rate_limit:laoqian:exports";
    let limit = limit(1, Duration::from_secs(60));
    // Redis hangs: the call is sent, and the client gives up before the answer.
    server.signal("STOP");
    let acquiring = store.acquire_permit(key, &limit);
    let cancelled = tokio::time::timeout(Duration::from_millis(200), acquiring).await;
    assert!(cancelled.is_err(), "no answer while Redis hangs");
    server.signal("CONT");
    // The script ran once Redis resumed, and the permit went back after it.
    let raw = redis::Client::open(server.url()).unwrap();
    let mut raw = raw.get_multiplexed_async_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let exists: bool = raw.exists(key).await.unwrap();
        let held: u64 = raw.zcard(key).await.unwrap();
        if held == 0 && !exists {
            break;
        }
        assert!(Instant::now() < deadline, "the permit stayed held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(store.acquire_permit(key, &limit).await.unwrap().allowed());
}

/// A `permit_holder` process: another instance sharing the Redis.
struct Holder {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Holder {
    fn start(url: &str, key: &str, max: u64, lease: Duration, count: u64) -> (Self, u64) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_permit_holder"))
            .args([url, key])
            .arg(max.to_string())
            .arg(lease.as_millis().to_string())
            .arg(count.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("permit_holder starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut holder = Self {
            child,
            stdin,
            stdout,
        };
        let line = holder.line();
        let held = line
            .strip_prefix("held ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("permit_holder said {line:?}"));
        (holder, held)
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("permit_holder writes");
        line.trim().to_owned()
    }

    fn release(&mut self) {
        writeln!(self.stdin, "release").unwrap();
        assert_eq!(self.line(), "released");
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn two_processes_share_the_limit() {
    let redis = redis();
    let key = redis.key("exports");
    let limit = limit(3, Duration::from_secs(30));
    let (mut other, held_there) = Holder::start(redis.url(), &key, 3, limit.lease(), 2);
    assert_eq!(held_there, 2);
    let store = redis.store().await;
    let here = acquire_at_once(std::slice::from_ref(&store), &key, limit, 10).await;
    assert_eq!(granted(&here), 1);
    other.release();
    until_held(&redis, &key, 1).await;
    let more = acquire_at_once(std::slice::from_ref(&store), &key, limit, 10).await;
    assert_eq!(granted(&more), 2);
    // And the other way round: this process holds them all now.
    let (_other, held_there) = Holder::start(redis.url(), &key, 3, limit.lease(), 1);
    assert_eq!(held_there, 0);
}

#[tokio::test]
async fn a_killed_instances_permits_expire_when_their_leases_end() {
    let redis = redis();
    let key = redis.key("exports");
    let lease = Duration::from_millis(1_500);
    let limit = limit(2, lease);
    let (mut holder, held_there) = Holder::start(redis.url(), &key, 2, lease, 2);
    assert_eq!(held_there, 2);
    // Alive, it renews its leases: still held well after the first lease.
    tokio::time::sleep(lease + Duration::from_millis(500)).await;
    let store = redis.store().await;
    assert!(!store.acquire_permit(&key, &limit).await.unwrap().allowed());
    holder.kill();
    // Dead, its leases end where their last renewal put them: denied just
    // before the later one ends, allowed from then on (at times given to Redis).
    let mut raw = redis.raw().await;
    let ends: Vec<(String, u64)> = raw.zrange_withscores(&key, 0, -1).await.unwrap();
    assert_eq!(ends.len(), 2);
    let (first_end, last_end) = (ends[0].1, ends[1].1);
    let clocked = limiter_tests::at::At::redis(redis.url(), RedisConfig::new()).await;
    let before = clocked
        .acquire_permit_at(&key, &limit, first_end - 1)
        .await
        .unwrap();
    assert!(!before.allowed());
    let between = clocked
        .acquire_permit_at(&key, &limit, first_end)
        .await
        .unwrap();
    assert!(between.allowed(), "the first lease has ended");
    let after = clocked
        .acquire_permit_at(&key, &limit, last_end)
        .await
        .unwrap();
    assert!(after.allowed(), "both have ended");
    drop((between, after));
    until_held(&redis, &key, 0).await;
    // And on Redis's own clock, the dead instance's permits are gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if store.acquire_permit(&key, &limit).await.unwrap().allowed() {
            break;
        }
        assert!(Instant::now() < deadline, "the leases never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
