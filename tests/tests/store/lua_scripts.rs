//! The Redis store's Lua, compiled and run by a real Redis: every file
//! compiles on its own (`SCRIPT LOAD` compiles without running), and so
//! does every script joined from them; a peek's guard refuses any command
//! or key it does not know, with an error and without a write.

use std::collections::BTreeMap;

use limiter_redis::lua::{self, HELPERS, PRELUDE, SHEBANG};
use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};

fn file(name: &str) -> &'static str {
    let found = limiter_redis::lua_files().iter().find(|(n, _)| *n == name);
    found.unwrap_or_else(|| panic!("no file {name}")).1
}

async fn script_load(con: &mut MultiplexedConnection, source: &str) -> RedisResult<String> {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query_async(con)
        .await
}

async fn eval<T: redis::FromRedisValue>(
    con: &mut MultiplexedConnection,
    source: &str,
    key: &str,
    args: &[&str],
) -> RedisResult<T> {
    redis::cmd("EVAL")
        .arg(source)
        .arg(1)
        .arg(key)
        .arg(args)
        .query_async(con)
        .await
}

#[tokio::test]
async fn every_lua_file_compiles_on_its_own() {
    let redis = limiter_tests::redis();
    let mut con = redis.raw().await;
    let files = limiter_redis::lua_files();
    assert_eq!(files.len(), 30);
    for (name, text) in files {
        let loaded = script_load(&mut con, text).await;
        assert!(loaded.is_ok(), "{name}: {loaded:?}");
    }
}

#[tokio::test]
async fn every_script_compiles_and_loads_under_its_hash() {
    let redis = limiter_tests::redis();
    let mut con = redis.raw().await;
    let scripts = limiter_redis::lua_scripts();
    assert_eq!(scripts.len(), 34);
    for (name, script) in scripts {
        let loaded = script_load(&mut con, script.source()).await;
        let loaded = loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded, script.hash(), "{name}");
    }
}

/// A hash algorithm of a test's own, counting in the field `c` of a hash
/// tagged `test`, whose `step` first runs `sneak` (some Redis call).
fn test_algorithm(sneak: &str) -> String {
    format!(
        "local key = KEYS[1]
local count
local function read_state()
  local stored, foreign = hash_fields(key, 'test', 'c')
  count = tonumber(stored[2]) or 0
  return foreign, count
end
local function step(cost)
  {sneak}
  count = count + cost
  return true, count
end
local function answer(_, allowed, count)
  return allowed and 1 or 0, 0, -1, 0, 0, 1, count, 0
end
local function write_state()
  db.call('HSET', key, 'a', 'test', 'c', int(count))
  return count
end
"
    )
}

/// The test algorithm joined as the store joins a hash algorithm's
/// scripts, with `driver` last.
fn joined(sneak: &str, driver: &str) -> String {
    [
        SHEBANG,
        PRELUDE,
        HELPERS,
        &test_algorithm(sneak),
        file("hash_decide.lua"),
        file(driver),
    ]
    .concat()
}

async fn state(con: &mut MultiplexedConnection, key: &str) -> (BTreeMap<String, String>, i64) {
    let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut *con)
        .await
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(con).await.unwrap();
    (fields, ttl)
}

#[tokio::test]
async fn a_peek_refuses_every_write_and_every_other_key_and_writes_nothing() {
    let redis = limiter_tests::redis();
    let mut con = redis.raw().await;
    let key = redis.key("counted");
    let other = redis.key("other");
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(&["a", "test", "c", "5"])
        .query_async(&mut con)
        .await
        .unwrap();
    let before = state(&mut con, &key).await;
    assert_eq!(before.1, -1);

    // Reads of the key given pass: the peek answers what a check would.
    let reply: Vec<i64> = eval(&mut con, &joined("", "peek.lua"), &key, &["", "2"])
        .await
        .unwrap();
    assert_eq!(reply, [1, 0, -1, 0, 0, 1, 7, 0]);
    assert_eq!(state(&mut con, &key).await, before);

    let sneaks = [
        "db.call('HSET', key, 'c', '100')".to_owned(),
        "db.call('hset', key, 'c', '100')".to_owned(),
        "db.pcall('DEL', key)".to_owned(),
        "db.call('PEXPIRE', key, 1000)".to_owned(),
        "db.call('SET', key, 'x')".to_owned(),
        "db.call('TIME')".to_owned(),
        format!("db.call('HMGET', '{other}', 'c')"),
        format!("db.call('HSET', '{other}', 'c', '1')"),
    ];
    for sneak in &sneaks {
        let refused: RedisResult<Value> =
            eval(&mut con, &joined(sneak, "peek.lua"), &key, &["", "2"]).await;
        let error = refused.expect_err(sneak).to_string();
        assert!(error.contains("a peek may not run"), "{sneak}: {error}");
        assert_eq!(state(&mut con, &key).await, before, "{sneak}");
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&other)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(exists, 0, "{sneak}");
    }

    // The same write in a check goes through: the guard is what stops it.
    let reply: Vec<i64> = eval(
        &mut con,
        &joined(&sneaks[0], "single.lua"),
        &key,
        &["", "2"],
    )
    .await
    .unwrap();
    assert_eq!(reply, [1, 0, -1, 0, 0, 1, 7, 0]);
    let (fields, _) = state(&mut con, &key).await;
    assert_eq!(fields.get("c").map(String::as_str), Some("7"));
}

/// Each algorithm's peek and check scripts by name, with a check's
/// arguments at 120 s (every window and bucket 60 s or less).
fn algorithms() -> Vec<(&'static str, Vec<&'static str>)> {
    let at = "120000000";
    vec![
        (
            "sliding_log",
            vec![
                at, "1", "60000", "60000000", "2", "10", "60000000", "5", "1000000",
            ],
        ),
        ("fixed_window", vec![at, "1", "10", "60000000"]),
        ("sliding_window", vec![at, "1", "10", "60000000"]),
        ("meter", vec![at, "1", "100", "1", "10", "0"]),
        ("meter", vec![at, "1", "100", "1", "10", "1"]),
        ("meter", vec![at, "1", "100", "1", "10", "g"]),
    ]
}

fn named(name: &str) -> &'static lua::Lua {
    let scripts = limiter_redis::lua_scripts();
    let found = scripts.into_iter().find(|(n, _)| n == name);
    found.unwrap_or_else(|| panic!("no script {name}")).1
}

#[tokio::test]
async fn a_peek_reads_another_algorithms_state_as_absent_and_leaves_it() {
    let redis = limiter_tests::redis();
    let mut con = redis.raw().await;
    let fresh = redis.key("fresh");
    for (n, (algorithm, args)) in algorithms().into_iter().enumerate() {
        let peek = named(&format!("{algorithm} peek"));
        let check = named(&format!("{algorithm} single"));
        let _: () = redis::cmd("DEL")
            .arg(&fresh)
            .query_async(&mut con)
            .await
            .unwrap();
        let absent: Vec<i64> = eval(&mut con, check.source(), &fresh, &args).await.unwrap();
        for (i, foreign) in [
            vec!["SET", "", "text"],
            vec!["HSET", "", "a", "another", "c", "3"],
        ]
        .into_iter()
        .enumerate()
        {
            let key = redis.key(&format!("{algorithm}-{n}-{i}"));
            let mut set = redis::cmd(foreign[0]);
            set.arg(&key).arg(&foreign[2..]);
            let _: () = set.query_async(&mut con).await.unwrap();
            let dump: Vec<u8> = redis::cmd("DUMP")
                .arg(&key)
                .query_async(&mut con)
                .await
                .unwrap();
            let peeked: Vec<i64> = eval(&mut con, peek.source(), &key, &args).await.unwrap();
            assert_eq!(peeked, absent, "{algorithm} {foreign:?}");
            let after: Vec<u8> = redis::cmd("DUMP")
                .arg(&key)
                .query_async(&mut con)
                .await
                .unwrap();
            assert_eq!(after, dump, "{algorithm} {foreign:?}");
            // A check deletes it and answers the same.
            let checked: Vec<i64> = eval(&mut con, check.source(), &key, &args).await.unwrap();
            assert_eq!(checked, absent, "{algorithm} {foreign:?}");
        }
    }
}
