//! An instance that holds concurrency permits on a shared Redis, for the
//! tests that share them across processes and kill a holder.
//!
//! `permit_holder <redis url> <key> <max> <lease ms> <count>` takes up to
//! `count` permits of `key` (a limit of `max` in flight, leased for
//! `lease ms`), prints `held <n>` with the number it got, and keeps them
//! (renewing their leases) until it reads `release` on its standard input
//! (then prints `released`) or its input ends.

use std::io::BufRead;
use std::time::Duration;

use limiter_core::{ConcurrencyLimit, Permits};
use limiter_redis::RedisStore;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, key, max, lease_ms, count] = args.as_slice() else {
        eprintln!("usage: permit_holder <redis url> <key> <max> <lease ms> <count>");
        std::process::exit(2);
    };
    let number = |text: &str| text.parse::<u64>().expect("a number");
    let limit = ConcurrencyLimit::new(number(max))
        .and_then(|limit| limit.with_lease(Duration::from_millis(number(lease_ms))))
        .expect("a valid limit");
    let store = RedisStore::connect(url).await.expect("Redis is reachable");
    let mut held = Vec::new();
    for _ in 0..number(count) {
        let acquired = store
            .acquire_permit(key, &limit)
            .await
            .expect("Redis answers");
        held.extend(acquired.permit());
    }
    println!("held {}", held.len());
    let (lines, mut commands) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(command) = commands.recv().await {
        if command.trim() == "release" {
            // Given back in tasks of their own, which run while this one waits.
            held.clear();
            println!("released");
        }
    }
}
