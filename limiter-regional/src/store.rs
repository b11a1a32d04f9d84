//! The regional store: decisions by this region's Redis, syncs with the
//! others at tiers.

use std::fmt;
use std::sync::Arc;

use super::breaker::PeerBreaker;
use super::check::CheckReply;
use super::config::RegionalConfig;
use super::link::{CHECK, Link};
use super::region::{Region, RegionError};
use super::registry::{Registry, SyncRequest};
use super::relay::Relays;
use super::stats::{Counters, RegionStats, bump};
use super::tiers::Tiers;
use limiter_core::Decision;
use limiter_core::Store;
use limiter_core::SystemClock;
use limiter_core::{Algorithm, Policy};
use limiter_core::{ConfigError, Error};
use limiter_redis::{RedisConfig, RedisStore};

/// One quota shared by several regions, each deciding locally: tiered
/// counting.
///
/// Each region runs its own `RegionalStore` over its own Redis (standalone
/// or Cluster) and the other regions' Redis, every region named alike in
/// every region's configuration. A decision is one call to this region's
/// Redis; the other regions are read and written only by background syncs,
/// at tiers.
///
/// Runs the fixed window and the sliding window counter, both with windows
/// aligned to multiples of the window (the single-region fixed window
/// starts at a key's first request instead: here every region must agree
/// on which window a request belongs to). Other policies are refused with
/// [`ConfigError::AlgorithmNotSupported`]: a sliding log's count over
/// `(t - W, t]` shrinks as entries age, so a count read at a tier is not a
/// lower bound for long, and bucket levels do not add up across regions
/// (each is capped at the capacity), so neither has a sum to tier on.
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
/// Each region's Redis holds that region's own count per key and window,
/// and what it last learned of the others' counts. A check adds the
/// request to the local count if the local count plus the known counts of
/// the others (and, for the fixed window, no announcement that the quota
/// is exhausted) leave room for it. Known counts are lower bounds (counts
/// only grow within a window), so a region never denies before the quota
/// is used.
///
/// When the local count reaches a tier (the first at the quota divided by
/// the number of regions, then one every step, see [`RegionalConfig`]),
/// the check asks for a sync, which runs in the background: it reads every
/// other region's count (one call each, at once), writes what it learned
/// into the local Redis for every instance of this region, and
/// - when the quota is used, announces it: it writes the counts it knows
///   and an "exhausted" mark for the window into every region, which then
///   deny until the window ends;
/// - when the regions could pass the quota before each reaches its next
///   tier, tightens the tiers of the regions still far from theirs, so that
///   every region syncs within a step from then on.
///
/// # Guarantees
/// Per window, with `n` regions and a step of `s` requests:
/// - at most `quota + n × s` pass, whatever the cross-region latency, the
///   load or a backlog of syncs: from a tier on, a region whose sync has not
///   completed is held to one step past its count when it asked (its checks
///   are denied, with a retry after of the peer deadline, until the sync
///   completes), and a sync whose window ended before its turn is dropped.
///   The sliding window counter adds what arrives while a window's first
///   sync reads the previous window's counts. A first tier above the quota
///   divided by the regions adds `n × first − quota`; a sync dropped because
///   too many waited leaves that key held until it asks again;
/// - traffic from one region only gets the quota whenever its syncs keep up
///   with it (a step per round trip to the farthest region);
/// - no request is denied before the quota is used, counted across
///   regions, except while its region is held.
///
/// # Latency and failures
/// The check is one script on one key of this region's Redis, bounded by
/// [`RegionalConfig::local_deadline`] (and, behind the HTTP layer, guarded
/// like any remote store). Crossing a tier adds no round trip: the sync is
/// spawned. A call to another region has a deadline and goes through a
/// breaker per region: while a region is slow or unreachable, the others
/// count it at the last count they learned for the window and keep
/// syncing among themselves, and it counts them at what it learned. Each
/// side of a partition so keeps its own admissions within the quota (and
/// the bound above): a window may see up to the quota once per side.
///
/// # Clocks
/// Each region's Redis decides the window by its own clock; windows are
/// multiples of the window length, so regions agree on them as long as
/// their clocks agree. A region whose clock is `d` ahead moves to the next
/// window `d` early: its counts still go to the window it counted them in
/// (the others map them by its stored window), so the bound holds per
/// window, but windows start `d` apart across regions.
#[derive(Clone)]
pub struct RegionalStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) local: Local,
    pub(crate) peers: Box<[Peer]>,
    pub(crate) config: RegionalConfig,
    pub(crate) stats: Counters,
    pub(crate) registry: Registry,
    /// Blocks and denials under way to the other regions.
    pub(crate) relays: Relays,
}

pub(crate) struct Local {
    pub(crate) name: Box<str>,
    pub(crate) link: Link,
    /// The region's blocks and penalty counts (`control.rs`).
    pub(crate) store: RedisStore,
}

pub(crate) struct Peer {
    pub(crate) name: Box<str>,
    pub(crate) link: Link,
    pub(crate) breaker: PeerBreaker<SystemClock>,
    /// The region's blocks and penalty counts (`control.rs`).
    pub(crate) store: RedisStore,
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
            let config = RedisConfig::new()
                .response_timeout(deadline)
                .connection_timeout(config.connection_timeout);
            region
                .endpoint
                .open_store(config)
                .map_err(|source| RegionError::Store {
                    name: region.name.to_string(),
                    source,
                })
        };
        let local = Local {
            link: link(&local, config.local_deadline)?,
            store: store(&local, config.local_deadline)?,
            name: local.name,
        };
        let peers = peers
            .into_iter()
            .map(|region| {
                Ok(Peer {
                    link: link(&region, config.peer_deadline)?,
                    breaker: PeerBreaker::new(config.peer_breaker, SystemClock),
                    store: store(&region, config.peer_deadline)?,
                    name: region.name,
                })
            })
            .collect::<Result<Box<[Peer]>, RegionError>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                registry: Registry::new(config.sync_concurrency, config.max_pending_syncs),
                local,
                peers,
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

    /// What this store has done so far.
    pub fn stats(&self) -> RegionStats {
        self.inner.stats.snapshot()
    }

    /// Waits until no sync runs or waits: every tier crossed so far has
    /// been synced (or given up on). For tests and graceful shutdowns.
    pub async fn idle(&self) {
        self.inner.registry.idle().await;
    }

    /// Checks a request at `now` (µs since the Unix epoch) given by the
    /// caller instead of the local Redis server's clock; its syncs use that
    /// time too. For tests that drive windows by hand only.
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

    async fn run(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        policy.validate_cost(cost)?;
        let sliding = match policy.algorithm() {
            Algorithm::FixedWindow => false,
            Algorithm::SlidingWindow => true,
            other => {
                return Err(ConfigError::AlgorithmNotSupported {
                    store: "regional store",
                    supported: "fixed_window and sliding_window",
                    algorithm: other.name(),
                }
                .into());
            }
        };
        let inner = &self.inner;
        let rule = policy.rules()[0];
        let tiers = inner.tiers(rule.limit());
        let mut call = CHECK.call(key);
        match now {
            Some(now) => call.arg(now),
            None => call.arg(""),
        };
        call.arg(cost)
            .arg(rule.limit())
            .arg(rule.window_us())
            .arg(u8::from(sliding))
            .arg(tiers.first)
            .arg(tiers.step);
        for peer in &inner.peers {
            call.arg(&*peer.name);
        }
        let reply = CheckReply::parse(&inner.local.link.eval(&CHECK, &call).await?)?;
        bump(&inner.stats.checks);
        if reply.noticed {
            bump(&inner.stats.exhausted_received);
            metrics::counter!("limiter_region_exhausted_total", "direction" => "received")
                .increment(1);
        }
        if reply.sync {
            // A held check asks again for the sync it waits on.
            if !reply.held {
                bump(&inner.stats.tier_crossings);
                metrics::counter!("limiter_region_tier_crossings_total").increment(1);
            }
            Registry::request(
                &self.inner,
                SyncRequest {
                    key: key.into(),
                    rule,
                    sliding,
                    start: reply.start,
                    now: reply.now,
                    injected_time: now.is_some(),
                    asked: std::time::Instant::now(),
                },
            );
        }
        if reply.held {
            bump(&inner.stats.held);
            metrics::counter!("limiter_region_held_total").increment(1);
        }
        reply.decide(rule, sliding, cost, inner.config.peer_deadline)
    }
}

impl Inner {
    pub(crate) fn tiers(&self, quota: u64) -> Tiers {
        Tiers::new(
            quota,
            self.peers.len() + 1,
            self.config.first_tier,
            self.config.step,
        )
    }
}

impl Store for RegionalStore {
    async fn check(&self, key: &str, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.run(key, policy, cost, None).await
    }
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
