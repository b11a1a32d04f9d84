//! The Redis store: state shared by every instance of a service.
//!
//! Each algorithm is one Lua script (in `scripts/`, sharing `prelude.lua`),
//! so a check is one atomic round trip. Scripts are sent by SHA1 (EVALSHA)
//! and loaded only when the server answers NOSCRIPT, which means the call did
//! not run. No other failed call is ever sent again: it may have executed.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::OnceCell;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

use crate::decision::{Decision, RuleStatus};
use crate::error::Error;
use crate::policy::{Algorithm, Kind, Policy};
use crate::store::Store;

/// One algorithm's script: the prelude followed by the algorithm's file,
/// hashed once (for EVALSHA) on first use.
struct Lua {
    #[cfg_attr(not(feature = "test-util"), allow(dead_code))]
    source: &'static str,
    script: LazyLock<Script>,
}

macro_rules! lua {
    ($file:literal) => {{
        const SOURCE: &str = concat!(
            include_str!("scripts/prelude.lua"),
            include_str!(concat!("scripts/", $file))
        );
        Lua {
            source: SOURCE,
            script: LazyLock::new(|| Script::new(SOURCE)),
        }
    }};
}

static SLIDING_LOG: Lua = lua!("sliding_log.lua");
static FIXED_WINDOW: Lua = lua!("fixed_window.lua");
static SLIDING_WINDOW: Lua = lua!("sliding_window.lua");
static BUCKET: Lua = lua!("bucket.lua");
static GCRA: Lua = lua!("gcra.lua");

fn lua(algorithm: Algorithm) -> &'static Lua {
    match algorithm {
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::TokenBucket | Algorithm::LeakyBucket => &BUCKET,
        Algorithm::Gcra => &GCRA,
    }
}

/// How the Redis store connects and how long it waits.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    response_timeout: Duration,
    connection_timeout: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            response_timeout: Duration::from_millis(50),
            connection_timeout: Duration::from_millis(500),
        }
    }
}

impl RedisConfig {
    /// The default: 50 ms per call, 500 ms to connect.
    pub fn new() -> Self {
        Self::default()
    }

    /// The deadline of one check: past it the check fails with a timeout
    /// error and is not replayed (it may have executed).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The deadline of establishing a connection.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }
}

/// The Redis store: exact and shared across every instance of a service.
///
/// One multiplexed connection carries all checks (clones share it) and
/// reconnects by itself after a failure. Time is the Redis server's.
///
/// ```no_run
/// use limiter_core::{Limiter, RedisStore};
///
/// # async fn run() -> Result<(), limiter_core::Error> {
/// // Connects now, and fails if Redis cannot be reached:
/// let limiter = Limiter::new(RedisStore::connect("redis://127.0.0.1:6379/").await?);
/// // Connects on first use, so a service starts while Redis is down:
/// let limiter = Limiter::new(RedisStore::open("redis://127.0.0.1:6379/")?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    config: RedisConfig,
    connection: OnceCell<ConnectionManager>,
}

impl RedisStore {
    /// Connects to a standalone Redis at `url` with [`RedisConfig::default`].
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(url, RedisConfig::default()).await
    }

    /// Connects to a standalone Redis at `url`.
    pub async fn connect_with(url: &str, config: RedisConfig) -> Result<Self, Error> {
        let store = Self::open_with(url, config)?;
        store.connection().await?;
        Ok(store)
    }

    /// A store for the standalone Redis at `url` that connects on first use
    /// (and again on later uses while it cannot), so a service can start
    /// while Redis is down. Fails only for a malformed URL.
    pub fn open(url: &str) -> Result<Self, Error> {
        Self::open_with(url, RedisConfig::default())
    }

    /// [`open`](Self::open) with a configuration.
    pub fn open_with(url: &str, config: RedisConfig) -> Result<Self, Error> {
        Ok(Self {
            inner: Arc::new(Inner {
                client: Client::open(url)?,
                config,
                connection: OnceCell::new(),
            }),
        })
    }

    async fn connection(&self) -> Result<ConnectionManager, Error> {
        let inner = &*self.inner;
        let connection = inner
            .connection
            .get_or_try_init(|| async {
                let manager = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(inner.config.response_timeout))
                    .set_connection_timeout(Some(inner.config.connection_timeout))
                    // Reconnect quickly; the caller's deadline bounds the wait.
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(100));
                ConnectionManager::new_with_config(inner.client.clone(), manager).await
            })
            .await?;
        Ok(connection.clone())
    }

    /// Checks a request at `now` (microseconds since the Unix epoch) given by
    /// the caller instead of the Redis server's clock. For tests that compare
    /// the stores on the same timestamps only: in production instances with
    /// skewed clocks would disagree.
    #[cfg(feature = "test-util")]
    pub async fn check_at(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        self.run(key, policy, cost, Some(now)).await
    }

    /// The Lua source of the script that runs `algorithm`, for benchmarks
    /// that compare the store with a bare EVALSHA of the same script.
    #[cfg(feature = "test-util")]
    pub fn script_source(algorithm: Algorithm) -> &'static str {
        lua(algorithm).source
    }

    async fn run(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let mut call = lua(policy.algorithm()).script.key(key);
        match now {
            Some(now) => call.arg(now),
            None => call.arg(""),
        };
        call.arg(cost);
        match policy.kind() {
            Kind::SlidingLog => {
                call.arg(policy.rules().len());
                for rule in policy.rules() {
                    call.arg(rule.limit()).arg(rule.window_us());
                }
            }
            Kind::FixedWindow | Kind::SlidingWindow => {
                let rule = policy.rules()[0];
                call.arg(rule.limit()).arg(rule.window_us());
            }
            Kind::TokenBucket(b) => {
                call.arg(b.unit).arg(b.drain).arg(b.capacity).arg(0);
            }
            Kind::LeakyBucket(b) => {
                call.arg(b.unit).arg(b.drain).arg(b.capacity).arg(1);
            }
            Kind::Gcra(g) => {
                call.arg(g.interval_us).arg(g.tolerance_us);
            }
        }
        let mut connection = self.connection().await?;
        let reply: Vec<i64> = call.invoke_async(&mut connection).await?;
        parse_reply(&reply, policy)
    }
}

/// Turns a script's reply (see `prelude.lua`) into a decision.
fn parse_reply(reply: &[i64], policy: &Policy) -> Result<Decision, Error> {
    let malformed = || Error::Protocol(format!("script reply {reply:?}"));
    let rules = policy.rules();
    let [
        allowed,
        decided_by,
        retry_after,
        delay,
        count,
        per_rule @ ..,
    ] = reply
    else {
        return Err(malformed());
    };
    if *count as usize != rules.len()
        || per_rule.len() != 2 * rules.len()
        || !(0..rules.len() as i64).contains(decided_by)
        || (*allowed == 1) != (*retry_after < 0)
    {
        return Err(malformed());
    }
    let mut statuses = [RuleStatus::EMPTY; crate::MAX_RULES];
    for (i, (rule, pair)) in rules.iter().zip(per_rule.chunks_exact(2)).enumerate() {
        statuses[i] = RuleStatus {
            rule: *rule,
            remaining: u64::try_from(pair[0]).map_err(|_| malformed())?,
            reset_after_us: u64::try_from(pair[1]).map_err(|_| malformed())?,
        };
    }
    Ok(Decision::new(
        &statuses[..rules.len()],
        *decided_by as usize,
        u64::try_from(*retry_after).ok(),
        u64::try_from(*delay).map_err(|_| malformed())?,
    ))
}

impl Store for RedisStore {
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.run(key, policy, cost, None).await
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore").finish_non_exhaustive()
    }
}
