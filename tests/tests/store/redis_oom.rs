//! Redis over its `maxmemory` with `noeviction`: every algorithm's script is
//! refused before it runs (`OOM`), the store answers an error of kind
//! `oom`, `Guarded` decides by its failure policy, and Redis holds not one
//! key more.

use std::time::Duration;

use limiter_core::{
    BreakerConfig, GuardConfig, Guarded, OnStoreError, Policy, Rate, Rule, Store, Verdict,
};
use limiter_redis::{RedisConfig, RedisStore};
use limiter_tests::RedisServer;

fn every_algorithm() -> Vec<Policy> {
    let rule = Rule::new(100, Duration::from_secs(60)).unwrap();
    let rate = Rate::new(10, Duration::from_secs(1)).unwrap();
    vec![
        Policy::sliding_log([rule, Rule::new(1_000, Duration::from_secs(3_600)).unwrap()]).unwrap(),
        Policy::fixed_window(rule),
        Policy::sliding_window(rule),
        Policy::token_bucket(rate, 20).unwrap(),
        Policy::leaky_bucket(rate, 20).unwrap(),
        Policy::gcra(rate, 20).unwrap(),
    ]
}

fn info_field(server: &RedisServer, section: &str, field: &str) -> u64 {
    server
        .command(&["INFO", section])
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
}

fn keys(server: &RedisServer) -> u64 {
    server.command(&["DBSIZE"]).trim().parse().unwrap()
}

#[tokio::test]
async fn over_maxmemory_every_script_is_refused_and_nothing_is_recorded() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
    let store = RedisStore::connect_with(&server.url(), config)
        .await
        .unwrap();
    // One big value, then a limit below what Redis holds.
    server.command(&["SETRANGE", "filler", "4000000", "x"]);
    let used = info_field(&server, "memory", "used_memory");
    let limit = (used - 1_000_000).to_string();
    assert_eq!(
        server
            .command(&["CONFIG", "SET", "maxmemory", &limit])
            .trim(),
        "OK"
    );
    assert_eq!(keys(&server), 1);

    for (algorithm, policy) in every_algorithm().iter().enumerate() {
        for user in 0..20 {
            let key = format!("new:{algorithm}:{user}");
            let error = store
                .check(&key, policy, 1)
                .await
                .expect_err("Redis is over maxmemory");
            assert_eq!(error.kind(), "oom", "{:?}: {error}", policy.algorithm());
        }
    }
    assert_eq!(keys(&server), 1, "no check recorded anything");

    // Through the guard, each of those failures is a fallback decision (the
    // breaker is kept closed so that every call goes to Redis).
    let guarded = Guarded::new(
        store.clone(),
        GuardConfig {
            deadline: Duration::from_secs(5),
            breaker: BreakerConfig {
                failures_to_open: u32::MAX,
                ..BreakerConfig::default()
            },
            ..GuardConfig::default()
        },
    );
    for (algorithm, policy) in every_algorithm().iter().enumerate() {
        let key = format!("guarded:{algorithm}");
        let verdict = guarded
            .check_with(&key, policy, 1, OnStoreError::default())
            .await
            .unwrap();
        assert!(
            matches!(verdict, Verdict::Fallback(d) if d.allowed()),
            "{:?}: {verdict:?}",
            policy.algorithm()
        );
    }
    assert_eq!(keys(&server), 1);

    // Room again: Redis decides and records.
    server.command(&["CONFIG", "SET", "maxmemory", "0"]);
    for (algorithm, policy) in every_algorithm().iter().enumerate() {
        let key = format!("new:{algorithm}:0");
        assert!(store.check(&key, policy, 1).await.unwrap().allowed());
    }
    assert_eq!(keys(&server), 1 + every_algorithm().len() as u64);
}
