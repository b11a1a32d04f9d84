//! Memory per block (issue 31): what each penalty-earned block costs, and
//! that a flood past the bound costs no more.
//! - the memory store: the heap (counted by the global allocator) grown by
//!   100,000 penalty blocks of user keys as the layer builds them
//!   (`rate_limit:user=made-up-000042`, 29 bytes), divided by 100,000;
//!   then the heap after a flood of 300,000 such blocks against the default
//!   bound of 100,000;
//! - Redis: `MEMORY USAGE` of the penalty blocks' sorted set and of the
//!   operator blocks' hash, and `used_memory` grown, after 20,000 blocks of
//!   each kind set through `RedisStore`, divided by 20,000; the local copy
//!   of each instance costs what the memory store's list does.
//!
//! `cargo bench -p limiter-benches --bench block_memory` (needs `redis-server`).

use std::alloc::System;
use std::time::Duration;

use cap::Cap;
use limiter_core::{
    BlockOrigin, DEFAULT_MAX_PENALTY_BLOCKS, ManualClock, MemoryStore, SharedControl,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use limiter_tests::control::ControlCalls;

#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, usize::MAX);

const MEMORY_BLOCKS: usize = 100_000;
const REDIS_BLOCKS: usize = 20_000;
const FIFTEEN_MINUTES: Duration = Duration::from_secs(900);

fn user_key(i: usize) -> String {
    format!("rate_limit:user=made-up-{i:06}")
}

/// Heap grown by `count` penalty blocks in a fresh memory store (the keys
/// are made and dropped outside the count), and the blocks it holds.
async fn memory_heap(count: usize) -> (usize, usize) {
    let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
    let store = MemoryStore::with_clock(clock.clone());
    let before = HEAP.allocated();
    for i in 0..count {
        let key = user_key(i);
        clock.advance(Duration::from_micros(1));
        store
            .block(&key, FIFTEEN_MINUTES, BlockOrigin::Penalty)
            .await
            .expect("a penalty block is kept");
    }
    let grown = HEAP.allocated() - before;
    let held = store.tables().blocks().held(BlockOrigin::Penalty);
    (grown, held)
}

fn used_memory(server: &RedisServer) -> i64 {
    let info = server.command(&["INFO", "memory"]);
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

fn memory_usage(server: &RedisServer, key: &str) -> i64 {
    let usage = server.command(&["MEMORY", "USAGE", key, "SAMPLES", "0"]);
    usage.trim().parse().expect("MEMORY USAGE answers a number")
}

/// Redis's memory grown by `REDIS_BLOCKS` blocks of `origin`, and the
/// `MEMORY USAGE` of the structure that holds them.
async fn redis_bytes(server: &RedisServer, origin: BlockOrigin, key: &str) -> (i64, i64) {
    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&server.url(), config)
        .await
        .expect("connect");
    // The first block subscribes the store: its connections exist before
    // the count starts.
    store
        .block("rate_limit:user=warm-up", FIFTEEN_MINUTES, origin)
        .await
        .expect("a block");
    store
        .unblock("rate_limit:user=warm-up")
        .await
        .expect("an unblock");
    let before = used_memory(server);
    for i in 0..REDIS_BLOCKS {
        store
            .block(&user_key(i), FIFTEEN_MINUTES, origin)
            .await
            .expect("a block");
    }
    (used_memory(server) - before, memory_usage(server, key))
}

#[tokio::main]
async fn main() {
    let (grown, held) = memory_heap(MEMORY_BLOCKS).await;
    assert_eq!(held, MEMORY_BLOCKS);
    let (flooded, kept) = memory_heap(3 * DEFAULT_MAX_PENALTY_BLOCKS).await;
    assert_eq!(kept, DEFAULT_MAX_PENALTY_BLOCKS);
    println!("| where | blocks | bytes | bytes per block |");
    println!("|---|---:|---:|---:|");
    println!(
        "| memory store, penalty blocks (heap) | {MEMORY_BLOCKS} | {grown} | {:.0} |",
        grown as f64 / MEMORY_BLOCKS as f64
    );
    println!(
        "| memory store, a flood of {} penalty blocks, bound {DEFAULT_MAX_PENALTY_BLOCKS} (heap) | {kept} | {flooded} | {:.0} |",
        3 * DEFAULT_MAX_PENALTY_BLOCKS,
        flooded as f64 / kept as f64
    );

    let server = RedisServer::start();
    for (origin, key) in [
        (BlockOrigin::Penalty, "{limiter:resets}:penalty_blocks"),
        (BlockOrigin::Operator, "{limiter:resets}:blocks"),
    ] {
        let (grown, usage) = redis_bytes(&server, origin, key).await;
        let n = REDIS_BLOCKS as f64;
        println!(
            "| Redis, {origin:?} blocks: `MEMORY USAGE {key}` | {REDIS_BLOCKS} | {usage} | {:.0} |",
            usage as f64 / n
        );
        println!(
            "| Redis, {origin:?} blocks: `used_memory` grown | {REDIS_BLOCKS} | {grown} | {:.0} |",
            grown as f64 / n
        );
    }
}
