//! The regional store: decisions by this region's Redis, syncs with the
//! others at tiers.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::breaker::PeerBreaker;
use super::config::RegionalConfig;
use super::link::{CHECK, Link};
use super::region::{Region, RegionError};
use super::sync::{Registry, SyncRequest};
use super::tiers::Tiers;
use crate::algorithm::{fixed_window, sliding_window};
use crate::clock::SystemClock;
use crate::decision::{Decision, RuleStatus};
use crate::error::{ConfigError, Error};
use crate::policy::{Algorithm, Policy};
use crate::rule::Rule;
use crate::store::Store;

/// One quota shared by several regions, each deciding locally: tiered
/// counting (see [the module](crate::RegionalStore#how-it-counts)).
///
/// Each region runs its own `RegionalStore` over its own Redis and the
/// other regions' Redis, all naming the regions alike. A decision is one
/// call to this region's Redis; the other regions are read and written only
/// by background syncs, at tiers.
///
/// Runs the fixed window (aligned to multiples of the window, so every
/// region agrees on which window a request belongs to) and the sliding
/// window counter; other policies are refused with
/// [`ConfigError::AlgorithmNotSupported`].
///
/// ```no_run
/// use std::time::Duration;
/// use limiter_core::{Limiter, Policy, Region, RegionalStore, Rule};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
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
#[derive(Clone)]
pub struct RegionalStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) local: Local,
    pub(crate) peers: Box<[Peer]>,
    pub(crate) config: RegionalConfig,
    pub(crate) stats: Counters,
    pub(crate) registry: Registry,
}

pub(crate) struct Local {
    pub(crate) name: Box<str>,
    pub(crate) link: Link,
}

pub(crate) struct Peer {
    pub(crate) name: Box<str>,
    pub(crate) link: Link,
    pub(crate) breaker: PeerBreaker<SystemClock>,
}

/// What a regional store has done since it was made: cumulative counts,
/// read with [`RegionalStore::stats`]. The same events go to the `metrics`
/// facade (see the README's metrics table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionStats {
    /// Decisions answered by this region's Redis.
    pub checks: u64,
    /// Checks that asked for a sync: a tier crossed, a sliding window
    /// started here, or the quota found full before it was announced.
    pub tier_crossings: u64,
    /// Syncs run (crossings of one key and window while its sync runs are
    /// served by one more run).
    pub syncs: u64,
    /// Syncs not run because too many keys waited for one.
    pub syncs_dropped: u64,
    /// Reads of another region's counts.
    pub cross_region_reads: u64,
    /// Writes into another region (tightened tiers, an exhausted quota).
    pub cross_region_writes: u64,
    /// Calls to another region that failed, timed out, or were skipped
    /// while its breaker was open.
    pub remote_errors: u64,
    /// Syncs that found the quota exhausted and announced it.
    pub exhausted_announced: u64,
    /// Announcements of another region noticed by a check here (one per
    /// key and window in this region).
    pub exhausted_received: u64,
}

impl RegionStats {
    /// Reads and writes to other regions.
    pub fn cross_region_calls(&self) -> u64 {
        self.cross_region_reads + self.cross_region_writes
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) checks: AtomicU64,
    pub(crate) tier_crossings: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) syncs_dropped: AtomicU64,
    pub(crate) cross_region_reads: AtomicU64,
    pub(crate) cross_region_writes: AtomicU64,
    pub(crate) remote_errors: AtomicU64,
    pub(crate) exhausted_announced: AtomicU64,
    pub(crate) exhausted_received: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl RegionalStore {
    /// A store deciding in `local`, syncing with `peers`, with
    /// [`RegionalConfig::default`].
    pub fn new(local: Region, peers: impl IntoIterator<Item = Region>) -> Result<Self, RegionError> {
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
        let local = Local {
            link: link(&local, config.local_deadline)?,
            name: local.name,
        };
        let peers = peers
            .into_iter()
            .map(|region| {
                Ok(Peer {
                    link: link(&region, config.peer_deadline)?,
                    breaker: PeerBreaker::new(config.peer_breaker, SystemClock),
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
        let c = &self.inner.stats;
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RegionStats {
            checks: read(&c.checks),
            tier_crossings: read(&c.tier_crossings),
            syncs: read(&c.syncs),
            syncs_dropped: read(&c.syncs_dropped),
            cross_region_reads: read(&c.cross_region_reads),
            cross_region_writes: read(&c.cross_region_writes),
            remote_errors: read(&c.remote_errors),
            exhausted_announced: read(&c.exhausted_announced),
            exhausted_received: read(&c.exhausted_received),
        }
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
        let mut call = CHECK.key(key);
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
        let reply = CheckReply::parse(&inner.local.link.eval(&call).await?)?;
        bump(&inner.stats.checks);
        if reply.noticed {
            bump(&inner.stats.exhausted_received);
            metrics::counter!("limiter_region_exhausted_total", "direction" => "received")
                .increment(1);
        }
        if reply.sync {
            bump(&inner.stats.tier_crossings);
            metrics::counter!("limiter_region_tier_crossings_total").increment(1);
            Registry::request(
                &self.inner,
                SyncRequest {
                    key: key.into(),
                    rule,
                    sliding,
                    start: reply.start,
                    now: reply.now,
                    injected_time: now.is_some(),
                },
            );
        }
        reply.decide(rule, sliding, cost)
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

/// The check script's reply (see `check.lua`).
#[derive(Debug)]
struct CheckReply {
    allowed: bool,
    sync: bool,
    start: u64,
    now: u64,
    /// The window's total before this request, and the previous window's.
    total: u64,
    total_before: u64,
    exhausted: bool,
    noticed: bool,
}

impl CheckReply {
    fn parse(reply: &[i64]) -> Result<Self, Error> {
        let malformed = || Error::Protocol(format!("regional check reply {reply:?}"));
        let &[
            allowed,
            sync,
            start,
            now,
            _own,
            _own_before,
            total,
            total_before,
            exhausted,
            noticed,
        ] = reply
        else {
            return Err(malformed());
        };
        let count = |n: i64| u64::try_from(n).map_err(|_| malformed());
        Ok(Self {
            allowed: allowed == 1,
            sync: sync == 1,
            start: count(start)?,
            now: count(now)?,
            total: count(total)?,
            total_before: count(total_before)?,
            exhausted: exhausted == 1,
            noticed: noticed == 1,
        })
    }

    /// The decision, with the statuses the single-region algorithm gives
    /// for the same totals at the same time.
    fn decide(&self, rule: Rule, sliding: bool, cost: u64) -> Result<Decision, Error> {
        let decision = if sliding {
            let mut state = Some(sliding_window::Counters {
                previous: self.total_before,
                current: self.total,
                start: self.start,
            });
            sliding_window::check(&mut state, &rule, self.now, cost)
        } else if self.exhausted {
            let ends_in = (self.start + rule.window_us()).saturating_sub(self.now);
            let status = RuleStatus {
                remaining: 0,
                reset_after_us: ends_in,
            };
            Decision::single(rule, status, Some(ends_in), 0)
        } else {
            let mut state = Some(fixed_window::Window {
                count: self.total,
                start: self.start,
            });
            fixed_window::check(&mut state, &rule, self.now, cost)
        };
        if decision.allowed() != self.allowed {
            return Err(Error::Protocol(format!(
                "regional check reply {self:?} disagrees with the algorithm"
            )));
        }
        Ok(decision)
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
