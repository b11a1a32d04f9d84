//! The sliding log's batch decides the requests after its first on what the
//! log holds, read once (`scripts/sliding_log_batch.lua`). Against the same
//! requests checked one at a time on Redis, on a key of their own, it must
//! give the same decisions and leave the very same entries, also where the
//! differential tests (`coalesce.rs`) do not go: the clock stepping back
//! (entries later than now), another instance's entries in the same
//! microsecond, a batch adding more entries than one command carries.

use std::time::Duration;

use limiter_core::{Decision, Policy, Rule};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;
use limiter_tests::at::At;
use limiter_tests::property::each_case;
use proptest::prelude::*;

const T0: u64 = 1_750_000_000_000_000;

/// Decides `costs` at `now` on `batched` in one batch, and on `single` one
/// check after another; both must agree.
async fn both(
    store: &At<RedisStore>,
    (batched, single): (&str, &str),
    policy: &Policy,
    costs: &[u64],
    now: u64,
) -> Vec<Decision> {
    let from_batch = store
        .check_batch_at(batched, policy, costs, now)
        .await
        .unwrap();
    let mut one_at_a_time = Vec::new();
    for &cost in costs {
        one_at_a_time.push(store.check_at(single, policy, cost, now).await.unwrap());
    }
    assert_eq!(from_batch, one_at_a_time, "costs {costs:?} at {now}");
    from_batch
}

/// The log's entries and their times, as Redis holds them.
fn entries(server: &RedisServer, key: &str) -> String {
    server.command(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
}

fn rules() -> impl Strategy<Value = Policy> {
    let rule = (1u64..=8, 1u64..=50).prop_map(|(limit, ms)| {
        Rule::new(limit, Duration::from_micros(ms * 1_000)).expect("a rule")
    });
    prop::collection::vec(rule, 1..=3)
        .prop_filter_map("a policy", |rules| Policy::sliding_log(rules).ok())
}

/// Batches whose times step forward and back (a clock stepped back leaves
/// entries later than now), with random costs.
fn case() -> impl Strategy<Value = (Policy, Vec<(i64, Vec<u64>)>)> {
    rules().prop_flat_map(|policy| {
        let most = policy.rules().iter().map(Rule::limit).min().unwrap_or(1);
        let cost = prop_oneof![3 => Just(1u64), 1 => 1..=most];
        let batch = (-60_000i64..=60_000, prop::collection::vec(cost, 1..12));
        (Just(policy), prop::collection::vec(batch, 1..10))
    })
}

#[test]
fn a_batch_decides_as_checks_one_at_a_time_when_the_clock_steps_back() {
    let server = RedisServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(At::redis(&server.url(), RedisConfig::new()));
    let case_number = std::sync::atomic::AtomicU64::new(0);
    each_case(128, case(), |(policy, batches)| {
        let case_number = case_number.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let keys = (
            format!("batched{case_number}"),
            format!("single{case_number}"),
        );
        let mut now = T0;
        for (step, costs) in &batches {
            now = now.saturating_add_signed(*step);
            runtime.block_on(both(&store, (&keys.0, &keys.1), &policy, costs, now));
            prop_assert_eq!(entries(&server, &keys.0), entries(&server, &keys.1));
        }
        Ok(())
    });
}

/// Another instance recorded requests in the same microsecond just before
/// the batch: the batch's entries are numbered after them.
#[tokio::test]
async fn a_batch_numbers_its_entries_after_another_instances_at_the_same_time() {
    let server = RedisServer::start();
    let store = At::redis(&server.url(), RedisConfig::new()).await;
    let policy = Policy::sliding_log([
        Rule::new(10, Duration::from_secs(1)).unwrap(),
        Rule::new(12, Duration::from_secs(10)).unwrap(),
    ])
    .unwrap();
    let now = T0;
    for key in ["batched", "single"] {
        store.check_at(key, &policy, 3, now - 5).await.unwrap();
        store.check_at(key, &policy, 2, now).await.unwrap();
    }
    let decisions = both(
        &store,
        ("batched", "single"),
        &policy,
        &[1, 2, 4, 1, 1],
        now,
    )
    .await;
    let allowed: Vec<bool> = decisions.iter().map(Decision::allowed).collect();
    assert_eq!(allowed, [true, true, false, true, true]);
    assert_eq!(entries(&server, "batched"), entries(&server, "single"));
    let at_now = server.command(&["ZRANGEBYSCORE", "batched", &now.to_string(), "+inf"]);
    let mut members: Vec<&str> = at_now.lines().collect();
    members.sort_unstable();
    let expected: Vec<String> = (0..7)
        .map(|i| format!("{now}-{i}"))
        .chain(["~".to_owned()])
        .collect();
    let mut expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(members, expected);
}

/// A batch adding more entries than one `ZADD` of the script carries
/// (1,000) writes them all.
#[tokio::test]
async fn a_batch_adding_thousands_of_entries_writes_them_all() {
    let server = RedisServer::start();
    let store = At::redis(&server.url(), RedisConfig::new()).await;
    let policy = Policy::sliding_log([Rule::new(2_600, Duration::from_secs(60)).unwrap()]).unwrap();
    let mut costs = vec![1; 2_000];
    costs.extend([3; 300]);
    let decisions = both(&store, ("batched", "single"), &policy, &costs, T0).await;
    let allowed = decisions.iter().filter(|d| d.allowed()).count();
    // 2,000 of cost 1, then 200 of cost 3 fill the 2,600.
    assert_eq!(allowed, 2_200);
    assert_eq!(server.command(&["ZCARD", "batched"]).trim(), "2601");
    assert_eq!(entries(&server, "batched"), entries(&server, "single"));
}
