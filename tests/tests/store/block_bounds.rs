//! Blocks earned by penalties and blocks set by an operator are bounded
//! apart on Redis (issue 31): a flood of penalty blocks keeps at most the
//! bound in Redis itself and in every instance's copy, the soonest-ending
//! ones giving way, never an operator's block, never a later offender's;
//! an instance subscribing afterwards loads the same bounded set.
//!
//! The blocks live under fixed names (`{limiter:resets}:...`), not under a
//! test's prefix: each test starts a server of its own, even when
//! `REDIS_URL` names a shared one.

use std::time::Duration;

use limiter_core::{BlockOrigin, SharedControl};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use limiter_tests::control::ControlCalls;
use redis::AsyncCommands;

const OPERATORS: &str = "{limiter:resets}:blocks";
const PENALTIES: &str = "{limiter:resets}:penalty_blocks";
const BOUND: usize = 50;
const FIFTEEN_MINUTES: Duration = Duration::from_secs(900);
/// How long a reply may take: a store's calls and loads move a million
/// blocks here, which a debug build on a loaded two-core machine has taken
/// up to about 30 s to do (the tests of this file run in parallel). It
/// bounds a hang; no outcome depends on it.
const REPLY_WAIT: Duration = Duration::from_secs(120);

/// A server of this test's own, and a plain connection to it. Its replies
/// may wait behind a store loading a million blocks (seconds on a loaded
/// machine), so it waits as long as the stores do, not the client's default
/// half second.
async fn own_redis() -> (RedisServer, redis::aio::MultiplexedConnection) {
    let server = RedisServer::start();
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(REPLY_WAIT));
    let raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    (server, raw)
}

fn key(name: &str) -> String {
    format!("rate_limit:{name}")
}

async fn store(url: &str, bound: usize) -> RedisStore {
    let config = RedisConfig::new()
        .response_timeout(REPLY_WAIT)
        .max_penalty_blocks(bound);
    RedisStore::connect_with(url, config).await.unwrap()
}

/// Subscribes `store` to the notices (which loads the blocks), and waits
/// until it answers `key` blocked.
async fn subscribed(store: &RedisStore, key: &str) {
    store.on_reset(Box::new(|_| true));
    for _ in 0..500 {
        if store.blocked(key).is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the store never loaded the block of {key}");
}

fn listed(store: &RedisStore, origin: BlockOrigin) -> Vec<String> {
    let list = store.tables().blocks();
    let mut keys = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = list.page(after.as_deref(), 1_000, now());
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        keys.extend(
            page.into_iter()
                .filter(|b| b.origin == origin)
                .map(|b| b.key),
        );
    }
    keys.sort();
    keys
}

fn now() -> u64 {
    use limiter_core::Clock;
    limiter_core::SystemClock.now_micros()
}

async fn in_redis(raw: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = raw.zrange(PENALTIES, 0, -1).await.unwrap();
    keys.sort();
    keys
}

/// `user=victim` blocked for 15 minutes by an operator, through `store`:
/// its key.
async fn operator_blocks_the_victim(store: &RedisStore) -> String {
    let victim = key("user=victim");
    store
        .operator_block(&victim, FIFTEEN_MINUTES)
        .await
        .unwrap();
    victim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_penalty_blocks_keeps_the_bound_in_redis_and_in_every_instance() {
    let (server, mut raw) = own_redis().await;
    let first = store(&server.url(), BOUND).await;
    let victim = operator_blocks_the_victim(&first).await;
    for i in 0..200 {
        let key = key(&format!("user=x{i:03}"));
        first.penalty_block(&key, FIFTEEN_MINUTES).await.unwrap();
    }
    // The 50 that end last (the last 50 blocked) are kept, in Redis and here.
    let kept: Vec<String> = (150..200).map(|i| key(&format!("user=x{i:03}"))).collect();
    assert_eq!(in_redis(&mut raw).await, kept);
    assert_eq!(listed(&first, BlockOrigin::Penalty), kept);
    assert_eq!(first.blocked(&key("user=x149")), None);

    // A fresh offender is blocked: x150, the soonest-ending, gives way.
    let fresh = key("user=fresh");
    first.penalty_block(&fresh, FIFTEEN_MINUTES).await.unwrap();
    assert!(first.blocked(&fresh).is_some());
    let mut kept: Vec<String> = kept[1..].to_vec();
    kept.push(fresh.clone());
    kept.sort();
    assert_eq!(in_redis(&mut raw).await, kept);
    assert_eq!(listed(&first, BlockOrigin::Penalty), kept);

    // The operator's block survived the flood, in Redis and here.
    let operators: Vec<String> = raw.hkeys(OPERATORS).await.unwrap();
    assert_eq!(operators, std::slice::from_ref(&victim));
    assert_eq!(
        listed(&first, BlockOrigin::Operator),
        std::slice::from_ref(&victim)
    );

    // An instance subscribing afterwards loads the same bounded set.
    let second = store(&server.url(), BOUND).await;
    subscribed(&second, &victim).await;
    assert_eq!(listed(&second, BlockOrigin::Penalty), kept);
    assert_eq!(
        listed(&second, BlockOrigin::Operator),
        std::slice::from_ref(&victim)
    );

    // Notices carry the origin: the second instance's copy keeps the bound too.
    let later = key("user=later");
    first.penalty_block(&later, FIFTEEN_MINUTES).await.unwrap();
    assert!(second.blocked(&later).is_some());
    assert_eq!(second.tables().blocks().held(BlockOrigin::Penalty), BOUND);
    assert_eq!(
        listed(&second, BlockOrigin::Penalty),
        in_redis(&mut raw).await
    );

    // Unblocking lifts both kinds, everywhere.
    first.penalty_block(&victim, FIFTEEN_MINUTES).await.unwrap();
    first.unblock(&victim).await.unwrap();
    assert_eq!(second.blocked(&victim), None);
    let operators: Vec<String> = raw.hkeys(OPERATORS).await.unwrap();
    assert!(operators.is_empty());
    let score: Option<f64> = raw.zscore(PENALTIES, &victim).await.unwrap();
    assert_eq!(score, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_loads_an_overfull_set_trims_it_to_its_bound() {
    let (server, mut raw) = own_redis().await;
    // 80 penalty blocks written as a version without the bound left them.
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    let now = seconds * 1_000_000 + micros;
    for i in 0..80u64 {
        let ends = now + 600_000_000 + i;
        let key = key(&format!("user=old{i:02}"));
        let _: () = raw.zadd(PENALTIES, key, ends).await.unwrap();
    }
    // And one that has ended.
    let _: () = raw
        .zadd(PENALTIES, key("user=over"), now - 1)
        .await
        .unwrap();
    let operator = key("user=operator");
    let _: () = raw
        .hset(OPERATORS, &operator, now + 600_000_000)
        .await
        .unwrap();

    let store = store(&server.url(), BOUND).await;
    subscribed(&store, &operator).await;
    let kept: Vec<String> = (30..80).map(|i| key(&format!("user=old{i:02}"))).collect();
    assert_eq!(in_redis(&mut raw).await, kept);
    assert_eq!(listed(&store, BlockOrigin::Penalty), kept);
    assert_eq!(listed(&store, BlockOrigin::Operator), [operator]);
}

/// The operator's bound holds in Redis too: a block past it is refused by
/// the script, before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_block_past_the_bound_is_refused_in_redis() {
    let (server, mut raw) = own_redis().await;
    let (seconds, _): (u64, u64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    let ends = (seconds + 600) * 1_000_000;
    // Fill the hash to the bound, as a flood would have, 10,000 at a call.
    let fill = redis::Script::new(
        "for i = ARGV[1], ARGV[1] + 9999 do redis.call('HSET', KEYS[1], 'k' .. i, ARGV[2]) end",
    );
    for start in (0..limiter_core::MAX_BLOCKS).step_by(10_000) {
        let _: () = fill
            .key(OPERATORS)
            .arg(start)
            .arg(ends)
            .invoke_async(&mut raw)
            .await
            .unwrap();
    }
    let store = store(&server.url(), BOUND).await;
    let refused = store
        .operator_block(&key("user=one-more"), FIFTEEN_MINUTES)
        .await;
    let error = refused.unwrap_err().to_string();
    assert!(
        error.contains("operator blocks are held already"),
        "{error}"
    );
    let held: usize = raw.hlen(OPERATORS).await.unwrap();
    assert_eq!(held, limiter_core::MAX_BLOCKS);
    // A penalty still blocks.
    let offender = key("user=offender");
    store
        .penalty_block(&offender, FIFTEEN_MINUTES)
        .await
        .unwrap();
    assert!(store.blocked(&offender).is_some());
}

/// On a Cluster the blocks' hash and sorted set share the channel's slot
/// (`{limiter:resets}`): the scripts that read and write both run there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_bound_holds_on_the_node_of_the_channel() {
    let cluster = limiter_tests::RedisCluster::start();
    let urls = cluster.urls();
    let config = RedisConfig::new()
        .response_timeout(REPLY_WAIT)
        .max_penalty_blocks(5);
    let first = RedisStore::connect_cluster(urls.iter().map(String::as_str), config.clone())
        .await
        .unwrap();
    let victim = operator_blocks_the_victim(&first).await;
    for i in 0..20 {
        first
            .penalty_block(&key(&format!("user=x{i:02}")), FIFTEEN_MINUTES)
            .await
            .unwrap();
    }
    let kept: Vec<String> = (15..20).map(|i| key(&format!("user=x{i:02}"))).collect();
    assert_eq!(listed(&first, BlockOrigin::Penalty), kept);
    let node = &cluster.nodes[cluster.owner_of(PENALTIES)];
    assert_eq!(node.command(&["ZCARD", PENALTIES]).trim(), "5");
    assert_eq!(node.command(&["HLEN", OPERATORS]).trim(), "1");

    let second = RedisStore::connect_cluster(urls.iter().map(String::as_str), config)
        .await
        .unwrap();
    subscribed(&second, &victim).await;
    assert_eq!(listed(&second, BlockOrigin::Penalty), kept);
    second.unblock(&kept[0]).await.unwrap();
    assert_eq!(first.blocked(&kept[0]), None);
    assert_eq!(node.command(&["ZCARD", PENALTIES]).trim(), "4");
}
