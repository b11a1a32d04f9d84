//! The regional store: decisions by this region's Redis, syncs with the
//! others at tiers.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::ask;
use super::breaker::PeerBreaker;
use super::check::{CheckReply, regional_rule};
use super::config::RegionalConfig;
use super::heartbeat;
use super::inner::{Inner, Local, Peer, Relays};
use super::link::{CHECK, Link};
use super::liveness::Liveness;
use super::outbox::Outbox;
use super::region::{Region, RegionError};
use super::registry::{AskRequest, Registry};
use super::shares::{ranks, share};
use super::stats::{Counters, RegionStats, bump};
use limiter_core::Decision;
use limiter_core::Error;
use limiter_core::SystemClock;
use limiter_core::{Policy, Rule};
use limiter_redis::RedisConfig;

/// One quota shared by several regions, each deciding locally: every
/// region holds a lease of each window's quota, and a region short of its
/// demand asks the others for their spare shares.
///
/// Each region runs its own `RegionalStore` over its own Redis (standalone
/// or Cluster) and the other regions' Redis, every region named alike in
/// every region's configuration. A decision is one call to this region's
/// Redis; the other regions are called only by background asks.
///
/// Runs the fixed window and the sliding window counter, both with windows
/// aligned to multiples of the window (the single-region fixed window
/// starts at a key's first request instead: here every region must agree
/// on which window a request belongs to). Other policies are refused with
/// [`ConfigError::AlgorithmNotSupported`](limiter_core::ConfigError::AlgorithmNotSupported): a sliding log's entries and a
/// bucket's level are not quantities a region can hand part of to another.
///
/// ```no_run
/// use std::time::Duration;
/// use limiter_core::{Limiter, Policy, Rule};
/// use limiter_regional::{Region, RegionalStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // In the north region; middle and south run the same with their own
/// // Redis as the local region.
/// let store = RegionalStore::new(
///     Region::open("north", "redis://10.1.0.1:6379/")?,
///     [
///         Region::open("middle", "redis://10.2.0.1:6379/")?,
///         Region::open_cluster("south", ["redis://10.3.0.1:6379/", "redis://10.3.0.2:6379/"])?,
///     ],
/// )?;
/// let limiter = Limiter::new(store);
/// let search = Policy::fixed_window(Rule::new(30, Duration::from_secs(1))?);
/// let decision = limiter.check("api-key:search", &search).await?;
/// # Ok(()) }
/// ```
///
/// # How it counts
/// Each window's quota is split into shares, one per region (the quota
/// divided evenly, the remainder one each to the first regions by name), so
/// the shares add up to the quota exactly. A region's lease of a window is
/// its share, plus what other regions gave it, minus what it gave them; its
/// Redis admits a request while the region's count (for the sliding window
/// counter, with the previous window's count weighted by its overlap) plus
/// the request's cost fits the lease.
///
/// When a key's demand here (requests asked, admitted or not, at the rate
/// seen so far in the window, or in the last one) will outrun its lease
/// before the window ends, the check asks, in the background, every other
/// region for its spare share: each region gives what it will not need
/// itself at its own rate, taking it off its own lease in the same script,
/// and this region adds what it got to its lease. An idle region's share
/// so flows to the busy one within one round trip, and a busy region keeps
/// its own share while it needs it (the idle share goes to whoever asks
/// first).
///
/// # Guarantees
/// Per window:
/// - **never more than the quota passes**, whatever the latency, the load,
///   a backlog of asks or a partition: a region gives only what its lease
///   leaves after its own count, in the same step that lowers its lease;
///   what it gave is added to one region's lease once, or lost (an answer
///   that never came, a window that ended first); so the leases add up to
///   at most the quota, and each region's count stays within its lease.
///   Proof and caveats (clocks, a Redis that restarts empty) in
///   docs/regions.md;
/// - traffic from one region gets the whole quota once its ask is
///   answered, a cross-region round trip into the window (earlier when
///   the previous window was busy: it asks at the window's first request);
/// - a request is denied before the quota is used only while this region's
///   lease is spent and its ask is out (a `Retry-After` of the ask's
///   answer at most), or while other regions hold shares they need.
///
/// # Latency and failures
/// The check is one script on one key of this region's Redis, bounded by
/// [`RegionalConfig::local_deadline`] (and, behind the HTTP layer, guarded
/// like any remote store). Asking adds no round trip to a decision: the
/// ask is spawned. A call to another region has a deadline and goes
/// through a breaker per region: a region slow or cut off gives nothing
/// and is given nothing; every region keeps deciding within its lease.
/// Regions send each other heartbeats: a region out of touch with most of
/// the others stops spending its share after a quarter of
/// [`RegionalConfig::reclaim_after`], and a majority that has not heard
/// from it for `reclaim_after` takes it (docs/regions.md).
///
/// # Clocks
/// Each region's Redis decides the window by its own clock; windows are
/// multiples of the window length, so regions agree on them as long as
/// their clocks agree. A region whose clock is `d` ahead moves to the next
/// window `d` early; shares are given for a window named by its start, so
/// the bound holds per window, but windows start `d` apart across regions.
#[derive(Clone)]
pub struct RegionalStore {
    pub(crate) inner: Arc<Inner>,
}

impl RegionalStore {
    /// A store deciding in `local`, syncing with `peers`, with
    /// [`RegionalConfig::default`].
    pub fn new(
        local: Region,
        peers: impl IntoIterator<Item = Region>,
    ) -> Result<Self, RegionError> {
        Self::with_config(local, peers, RegionalConfig::default())
    }

    /// A store deciding in `local`, syncing with `peers`. Connects on first
    /// use; fails for two regions of one name or a malformed URL.
    pub fn with_config(
        local: Region,
        peers: impl IntoIterator<Item = Region>,
        config: RegionalConfig,
    ) -> Result<Self, RegionError> {
        let peers: Vec<Region> = peers.into_iter().collect();
        for (i, region) in peers.iter().enumerate() {
            let earlier = std::iter::once(&local).chain(&peers[..i]);
            if earlier.into_iter().any(|r| r.name == region.name) {
                return Err(RegionError::DuplicateName {
                    name: region.name.to_string(),
                });
            }
        }
        let link = |region: &Region, deadline| {
            Link::open(&region.endpoint, deadline, config.connection_timeout).map_err(|source| {
                RegionError::Redis {
                    name: region.name.to_string(),
                    source,
                }
            })
        };
        let store = |region: &Region, deadline| {
            let redis = RedisConfig::new()
                .response_timeout(deadline)
                .connection_timeout(config.connection_timeout);
            #[cfg(feature = "test-util")]
            let redis = match &config.manual_clock {
                Some(clock) => redis.manual_clock(clock.clone()),
                None => redis,
            };
            region
                .endpoint
                .open_store(redis)
                .map_err(|source| RegionError::Store {
                    name: region.name.to_string(),
                    source,
                })
        };
        let mut ranks =
            ranks(std::iter::once(&*local.name).chain(peers.iter().map(|p| &*p.name))).into_iter();
        let local = Local {
            link: link(&local, config.local_deadline)?,
            store: store(&local, config.local_deadline)?,
            rank: ranks.next().unwrap_or_default(),
            name: local.name,
        };
        let peers = peers
            .into_iter()
            .zip(ranks)
            .map(|(region, rank)| {
                Ok(Peer {
                    link: link(&region, config.peer_deadline)?,
                    breaker: PeerBreaker::new(config.peer_breaker, SystemClock),
                    store: store(&region, config.peer_deadline)?,
                    name: region.name,
                    rank,
                    outbox: Outbox::default(),
                })
            })
            .collect::<Result<Box<[Peer]>, RegionError>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                registry: Registry::new(config.ask_concurrency, config.max_pending_asks),
                local,
                peers,
                // Until an ask is measured, a denied request retries soon.
                ask_took_us: AtomicU64::new(0),
                liveness: Liveness::default(),
                config,
                stats: Counters::default(),
                relays: Relays::default(),
            }),
        })
    }

    /// This region's name.
    pub fn region(&self) -> &str {
        &self.inner.local.name
    }

    /// The other regions' names.
    pub fn peers(&self) -> impl Iterator<Item = &str> {
        self.inner.peers.iter().map(|p| &*p.name)
    }

    /// The settings.
    pub fn config(&self) -> &RegionalConfig {
        &self.inner.config
    }

    /// The time a test's clock gives every call
    /// ([`RegionalConfig::manual_clock`](crate::RegionalConfig::manual_clock));
    /// `None`: the Redis servers'.
    pub(crate) fn test_now(&self) -> Option<u64> {
        use limiter_core::Clock;
        (self.inner.config.manual_clock.as_ref()).map(|clock| clock.now_micros())
    }

    /// What this store has done so far.
    pub fn stats(&self) -> RegionStats {
        self.inner.stats.snapshot()
    }

    /// Waits until no ask runs or waits: every ask so far has been answered
    /// (or given up on). For tests and graceful shutdowns.
    pub async fn idle(&self) {
        self.inner.registry.idle().await;
    }
}

/// The check script on `key` in this region's Redis; `dry`: a peek,
/// which changes nothing.
pub(crate) async fn check_script(
    inner: &Inner,
    key: &str,
    rule: Rule,
    sliding: bool,
    cost: u64,
    now: Option<u64>,
    dry: bool,
) -> Result<CheckReply, Error> {
    let mut call = CHECK.call(key);
    match now {
        Some(now) => call.arg(now),
        None => call.arg(""),
    };
    call.arg(cost)
        .arg(rule.window_us())
        .arg(u8::from(sliding))
        .arg(share(rule.limit(), inner.regions(), inner.local.rank))
        .arg(inner.ask_timeout_us())
        .arg(u8::from(dry));
    if now.is_none() {
        heartbeat::check_args(inner, &mut call, rule.limit());
    } else {
        // A test's time: the heartbeats' records (real time) do not apply.
        call.arg("").arg("").arg("");
    }
    CheckReply::parse(&inner.local.link.eval(&CHECK, &call).await?)
}

impl fmt::Debug for RegionalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionalStore")
            .field("region", &self.region())
            .field("peers", &self.peers().collect::<Vec<_>>())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

pub(crate) async fn run(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<Decision, Error> {
    Ok(run_recorded(store, key, policy, cost, now).await?.0)
}

/// A check, and the time it was decided at (µs, the script's clock).
pub(crate) async fn run_recorded(
    store: &RegionalStore,
    key: &str,
    policy: &Policy,
    cost: u64,
    now: Option<u64>,
) -> Result<(Decision, u64), Error> {
    let (rule, sliding) = regional_rule(policy, cost)?;
    heartbeat::ensure_started(&store.inner).await;
    let inner = &store.inner;
    let reply = check_script(inner, key, rule, sliding, cost, now, false).await?;
    bump(&inner.stats.checks);
    if reply.ask > 0 {
        ask::request(
            &store.inner,
            AskRequest {
                key: key.into(),
                rule,
                sliding,
                start: reply.start,
                now: reply.now,
                want: reply.ask,
                count: reply.count + if reply.allowed { cost } else { 0 },
                injected_time: now.is_some(),
                asked: std::time::Instant::now(),
            },
        );
    }
    if !reply.allowed && reply.asking {
        bump(&inner.stats.denied_while_asking);
        metrics::counter!("limiter_region_denied_while_asking_total").increment(1);
    }
    let decision = reply.decide(rule, sliding, cost, inner.ask_wait())?;
    Ok((decision, reply.now))
}
