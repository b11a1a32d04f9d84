//! The files each script is joined from: the shebang, then whole files in
//! order (the layout is described in `scripts.rs`).

use super::Lua;
use crate::lua::{CROSS_SLOT_SHEBANG, READ_ONLY_SHEBANG, SHEBANG};
use limiter_core::Algorithm;

/// The shebang, then `files`, each whole.
macro_rules! script {
    ($($file:literal),+) => {
        Lua::new(&[SHEBANG, $(include_str!($file)),+])
    };
}

/// The read-only shebang, then `files`, each whole.
macro_rules! read_only {
    ($($file:literal),+) => {
        Lua::new(&[READ_ONLY_SHEBANG, $(include_str!($file)),+])
    };
}

/// The sliding log's file, then `driver`.
macro_rules! sliding_log {
    ($driver:literal) => {
        script!("prelude.lua", "sliding_log.lua", $driver)
    };
}

/// The checks of several keys of one node: the cross-slot shebang, then
/// `files`, each whole, the last `keys.lua`.
macro_rules! keys {
    ($($file:literal),+) => {
        Lua::new(&[CROSS_SLOT_SHEBANG, $(include_str!($file)),+, include_str!("keys.lua")])
    };
}

/// A hash algorithm's `file` after the helpers, then its `decide`
/// (`hash_decide.lua`) and `driver`.
macro_rules! hashed {
    ($file:literal, $driver:literal) => {
        script!(
            "prelude.lua",
            "helpers.lua",
            $file,
            "hash_decide.lua",
            $driver
        )
    };
}

/// A hash algorithm's checks of several keys.
macro_rules! hashed_keys {
    ($file:literal) => {
        keys!("prelude.lua", "helpers.lua", $file, "hash_decide.lua")
    };
}

/// A hash algorithm's batch: its `file` after the helpers, then the loop.
macro_rules! hash_batch {
    ($file:literal) => {
        script!("prelude.lua", "helpers.lua", $file, "hash_batch.lua")
    };
}

/// An algorithm's scripts: its check, its peek, its batch of coalesced
/// checks, its checks of several keys, and its check counted by outcome
/// (none for the meters, which do not count by outcome).
pub(super) struct Scripts {
    single: Lua,
    peek: Lua,
    batch: Lua,
    keys: Lua,
    receipted: Option<Lua>,
}

static SLIDING_LOG: Scripts = Scripts {
    single: sliding_log!("single.lua"),
    peek: sliding_log!("peek.lua"),
    batch: sliding_log!("sliding_log_batch.lua"),
    keys: keys!("prelude.lua", "sliding_log.lua", "sliding_log_keys.lua"),
    receipted: Some(sliding_log!("receipted.lua")),
};
static FIXED_WINDOW: Scripts = Scripts {
    single: hashed!("fixed_window.lua", "single.lua"),
    peek: hashed!("fixed_window.lua", "peek.lua"),
    batch: hash_batch!("fixed_window.lua"),
    keys: hashed_keys!("fixed_window.lua"),
    receipted: Some(hashed!("fixed_window.lua", "receipted.lua")),
};
static SLIDING_WINDOW: Scripts = Scripts {
    single: hashed!("sliding_window.lua", "single.lua"),
    peek: hashed!("sliding_window.lua", "peek.lua"),
    batch: hash_batch!("sliding_window.lua"),
    keys: hashed_keys!("sliding_window.lua"),
    receipted: Some(hashed!("sliding_window.lua", "receipted.lua")),
};
static METER: Scripts = Scripts {
    single: hashed!("meter.lua", "single.lua"),
    peek: hashed!("meter.lua", "peek.lua"),
    batch: hash_batch!("meter.lua"),
    keys: hashed_keys!("meter.lua"),
    receipted: None,
};

fn of(algorithm: Algorithm) -> &'static Scripts {
    match algorithm {
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => &METER,
    }
}

/// The check of `algorithm`.
pub(crate) fn single(algorithm: Algorithm) -> &'static Lua {
    &of(algorithm).single
}

/// The peek of `algorithm`: its check's arguments and reply.
pub(crate) fn peek(algorithm: Algorithm) -> &'static Lua {
    &of(algorithm).peek
}

/// The batch of `algorithm` (`batch.rs`).
pub(crate) fn batch(algorithm: Algorithm) -> &'static Lua {
    &of(algorithm).batch
}

/// The checks of several keys under `algorithm` (`node_batch.rs`).
pub(crate) fn keys(algorithm: Algorithm) -> &'static Lua {
    &of(algorithm).keys
}

/// The check of `algorithm` that answers the time it recorded at
/// (`refund.rs`); `None` for an algorithm that does not count by outcome.
pub(crate) fn receipted(algorithm: Algorithm) -> Option<&'static Lua> {
    of(algorithm).receipted.as_ref()
}

pub(super) static CONCURRENCY: Lua =
    script!("prelude.lua", "helpers.lua", "reads.lua", "concurrency.lua");
pub(super) static LEASE: Lua = script!("prelude.lua", "helpers.lua", "reads.lua", "lease.lua");
pub(super) static RESET: Lua = script!("reset.lua");
pub(super) static PUBLISH: Lua = script!("publish.lua");
pub(super) static BLOCK: Lua = script!("block.lua");
pub(super) static UNBLOCK: Lua = script!("unblock.lua");
pub(super) static BLOCKS: Lua = script!("blocks.lua");
pub(super) static PENALTY: Lua = script!("penalty.lua");
pub(super) static ASSIGN: Lua = script!("assign.lua");
pub(super) static OVERRIDE: Lua = script!("override.lua");
pub(super) static OVERRIDES: Lua = script!("overrides.lua");
pub(super) static BUMP: Lua = script!("bump.lua");
pub(super) static REFUND: Lua = script!("refund.lua");
pub(super) static REPORT: Lua = script!("prelude.lua", "report.lua");
pub(super) static REPORTS: Lua = read_only!("prelude.lua", "reports.lua");

/// Every `.lua` file here: its name and its text.
#[cfg(any(test, feature = "test-util"))]
pub(crate) const FILES: &[(&str, &str)] = &{
    macro_rules! files {
        ($($file:literal),+ $(,)?) => {
            [$(($file, include_str!($file))),+]
        };
    }
    files!(
        "assign.lua",
        "block.lua",
        "blocks.lua",
        "bump.lua",
        "concurrency.lua",
        "fixed_window.lua",
        "hash_batch.lua",
        "hash_decide.lua",
        "helpers.lua",
        "keys.lua",
        "lease.lua",
        "meter.lua",
        "override.lua",
        "overrides.lua",
        "peek.lua",
        "penalty.lua",
        "prelude.lua",
        "publish.lua",
        "reads.lua",
        "receipted.lua",
        "refund.lua",
        "report.lua",
        "reports.lua",
        "reset.lua",
        "single.lua",
        "sliding_log.lua",
        "sliding_log_batch.lua",
        "sliding_log_keys.lua",
        "sliding_window.lua",
        "unblock.lua",
    )
};

/// Every script the store sends, by a name: for each algorithm its check,
/// peek, batch and check counted by outcome, then the others.
#[cfg(any(test, feature = "test-util"))]
pub(crate) fn all() -> Vec<(String, &'static Lua)> {
    let mut all = Vec::new();
    for (name, scripts) in [
        ("sliding_log", &SLIDING_LOG),
        ("fixed_window", &FIXED_WINDOW),
        ("sliding_window", &SLIDING_WINDOW),
        ("meter", &METER),
    ] {
        all.push((format!("{name} single"), &scripts.single));
        all.push((format!("{name} peek"), &scripts.peek));
        all.push((format!("{name} batch"), &scripts.batch));
        all.push((format!("{name} keys"), &scripts.keys));
        if let Some(receipted) = &scripts.receipted {
            all.push((format!("{name} receipted"), receipted));
        }
    }
    for (name, lua) in [
        ("concurrency", &CONCURRENCY),
        ("lease", &LEASE),
        ("reset", &RESET),
        ("publish", &PUBLISH),
        ("report", &REPORT),
        ("reports", &REPORTS),
        ("block", &BLOCK),
        ("unblock", &UNBLOCK),
        ("blocks", &BLOCKS),
        ("penalty", &PENALTY),
        ("assign", &ASSIGN),
        ("override", &OVERRIDE),
        ("overrides", &OVERRIDES),
        ("bump", &BUMP),
        ("refund", &REFUND),
    ] {
        all.push((name.to_owned(), lua));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> &'static str {
        FILES.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn every_lua_file_is_listed_as_it_is_on_disk() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".lua"))
            .collect();
        on_disk.sort();
        let listed: Vec<&str> = FILES.iter().map(|(name, _)| *name).collect();
        assert_eq!(on_disk, listed);
        for (name, text) in FILES {
            let read = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
            assert_eq!(read, *text, "{name}");
        }
    }

    #[test]
    fn every_script_starts_with_a_shebang_without_flags_but_the_read_only_and_cross_slot_ones() {
        for (name, lua) in all() {
            let shebang = match name.as_str() {
                "reports" => "#!lua flags=no-writes",
                keys if keys.ends_with(" keys") => "#!lua flags=allow-cross-slot-keys",
                _ => "#!lua",
            };
            assert_eq!(lua.source().lines().next(), Some(shebang), "{name}");
        }
    }

    #[test]
    fn a_check_its_peek_its_batch_and_its_receipted_check_run_one_file() {
        for algorithm in Algorithm::ALL {
            let own = match algorithm {
                Algorithm::SlidingLog => "sliding_log.lua",
                Algorithm::FixedWindow => "fixed_window.lua",
                Algorithm::SlidingWindow => "sliding_window.lua",
                _ => "meter.lua",
            };
            let mut scripts = vec![
                single(algorithm),
                peek(algorithm),
                batch(algorithm),
                keys(algorithm),
            ];
            scripts.extend(receipted(algorithm));
            for lua in scripts {
                assert_eq!(lua.source().matches(file(own)).count(), 1, "{algorithm:?}");
            }
        }
    }

    // What runs under a peek's guard reaches Redis through `db` only, so
    // the guard sees every call.
    #[test]
    fn the_algorithms_reach_redis_through_db_only() {
        for name in [
            "helpers.lua",
            "reads.lua",
            "sliding_log.lua",
            "fixed_window.lua",
            "sliding_window.lua",
            "meter.lua",
            "hash_decide.lua",
        ] {
            assert!(!file(name).contains("redis."), "{name}");
            // Nor through a copy of `db.call` kept before the peek puts its
            // guard in `db`'s place: every use is a call through `db`.
            let code: String = file(name)
                .lines()
                .map(|line| line.split("--").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            let uses = code.matches("db").count();
            let calls = code.matches("db.call(").count() + code.matches("db.pcall(").count();
            assert_eq!(uses, calls, "{name}: `db` used other than as db.call(…)");
        }
    }
}
