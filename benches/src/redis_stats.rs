//! What the Redis servers of a benchmark report of their work: the calls
//! of the check scripts and Redis's time in them (`INFO commandstats`), and
//! the servers' CPU time (`INFO cpu`), over every node, since the last
//! `CONFIG RESETSTAT`.

use redis::aio::MultiplexedConnection;

use crate::evalsha_field;

/// A connection to each node at `urls`, for the statistics.
pub async fn admins(urls: &[String]) -> Vec<MultiplexedConnection> {
    let mut admins = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).expect("a URL");
        admins.push(
            client
                .get_multiplexed_async_connection()
                .await
                .expect("connect redis-rs"),
        );
    }
    admins
}

/// `CONFIG RESETSTAT` on every node.
pub async fn reset(admins: &mut [MultiplexedConnection]) {
    for admin in admins {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(admin)
            .await
            .expect("CONFIG RESETSTAT");
    }
}

async fn info(admin: &mut MultiplexedConnection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query_async(admin)
        .await
        .expect("INFO")
}

/// EVALSHA calls and the microseconds they took since the last reset,
/// over every node.
pub async fn evalsha_stats(admins: &mut [MultiplexedConnection]) -> (u64, u64) {
    let (mut calls, mut usec) = (0, 0);
    for admin in admins {
        let info = info(admin, "commandstats").await;
        let field = |name: &str| -> u64 {
            evalsha_field(&info, name).map_or(0, |value| value.parse().expect("a count"))
        };
        calls += field("calls");
        usec += field("usec");
    }
    (calls, usec)
}

/// The servers' CPU time so far (`used_cpu_user` + `used_cpu_sys`), in
/// microseconds, over every node: the main thread's and the background
/// threads', which `CONFIG RESETSTAT` leaves.
pub async fn cpu_usec(admins: &mut [MultiplexedConnection]) -> u64 {
    let mut usec = 0.0;
    for admin in admins {
        let info = info(admin, "cpu").await;
        for line in info.lines() {
            if let Some(seconds) =
                (line.strip_prefix("used_cpu_user:")).or_else(|| line.strip_prefix("used_cpu_sys:"))
            {
                usec += seconds.trim().parse::<f64>().expect("CPU seconds") * 1e6;
            }
        }
    }
    usec as u64
}
