//! Redis over its `maxmemory` with `noeviction`: every algorithm's script is
//! refused before it runs (`OOM`), the store answers an error of kind
//! `oom`, `Guarded` decides by its failure policy, and Redis holds not one
//! key more. The instances' reports (top offenders across instances) stay
//! readable: that script only reads; the reports past their time leave at
//! the next publication, so a board holds only the live ones.

use std::time::Duration;

use limiter_core::{
    BreakerConfig, Capabilities, GuardConfig, Guarded, Key, OnStoreError, Policy, Rate, Rule,
    Store, Verdict,
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

/// Fills Redis with one big value, then sets its limit below what it holds.
fn over_maxmemory(server: &RedisServer) {
    server.command(&["SETRANGE", "filler", "4000000", "x"]);
    let used = info_field(server, "memory", "used_memory");
    let limit = (used - 1_000_000).to_string();
    assert_eq!(
        server
            .command(&["CONFIG", "SET", "maxmemory", &limit])
            .trim(),
        "OK"
    );
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
    over_maxmemory(&server);
    assert_eq!(keys(&server), 1);

    for (algorithm, policy) in every_algorithm().iter().enumerate() {
        for user in 0..20 {
            let key = Key::from(format!("new:{algorithm}:{user}"));
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
        let key = Key::from(format!("guarded:{algorithm}"));
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
        let key = Key::from(format!("new:{algorithm}:0"));
        assert!(store.check(&key, policy, 1).await.unwrap().allowed());
    }
    assert_eq!(keys(&server), 1 + every_algorithm().len() as u64);
}

#[tokio::test]
async fn over_maxmemory_the_instances_reports_stay_readable() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let reports = store.as_shared_control().unwrap();
    let ttl = Duration::from_secs(60);
    reports
        .publish_report("board", "a", "a's counts", ttl)
        .await
        .unwrap();
    reports
        .publish_report("board", "b", "b's counts", ttl)
        .await
        .unwrap();
    over_maxmemory(&server);

    let mut read = reports.reports("board").await.unwrap();
    read.sort_by(|x, y| x.instance.cmp(&y.instance));
    let read: Vec<_> = read.iter().map(|r| (&*r.instance, &*r.body)).collect();
    assert_eq!(read, [("a", "a's counts"), ("b", "b's counts")]);
    // Publishing writes: refused, and what was read is unchanged.
    let refused = reports.publish_report("board", "c", "c's", ttl).await;
    assert_eq!(refused.unwrap_err().kind(), "oom");
    assert_eq!(reports.reports("board").await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_board_holds_only_the_live_reports() {
    let server = RedisServer::start();
    let store = limiter_tests::at::At::redis(&server.url(), limiter_tests::at::patient()).await;
    let reports = store.as_shared_control().unwrap();
    let second = 1_000_000;
    let t0 = 1_750_000_000 * second;
    let ttl = Duration::from_secs(60);
    // Instances that came and went: each published once, within a minute.
    for instance in 0..20 {
        store.now(t0 + instance * second);
        let name = format!("gone-{instance}");
        reports
            .publish_report("board", &name, "counts", ttl)
            .await
            .unwrap();
    }
    let held = || server.command(&["HLEN", "{limiter:resets}:reports:board"]);
    assert_eq!(held().trim(), "20");
    // Past their time, they are read as gone, and still held...
    store.now(t0 + 100 * second);
    assert!(reports.reports("board").await.unwrap().is_empty());
    assert_eq!(held().trim(), "20");
    // ...until an instance new to the board publishes, which leaves the
    // live ones only.
    reports
        .publish_report("board", "live", "counts", ttl)
        .await
        .unwrap();
    assert_eq!(held().trim(), "1");
    let read = reports.reports("board").await.unwrap();
    assert_eq!((read.len(), &*read[0].instance), (1, "live"));
    // An instance already on the board publishes again without reading
    // the others' reports.
    let board_reads = || {
        let stats = server.command(&["INFO", "commandstats"]);
        let line = stats
            .lines()
            .find(|line| line.starts_with("cmdstat_hgetall:"));
        line.map(str::to_owned)
    };
    let before = board_reads();
    store.now(t0 + 105 * second);
    reports
        .publish_report("board", "live", "more counts", ttl)
        .await
        .unwrap();
    assert_eq!(board_reads(), before);
    let read = reports.reports("board").await.unwrap();
    assert_eq!(&*read[0].body, "more counts");
}
