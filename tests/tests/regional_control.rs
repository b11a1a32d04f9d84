//! Blocks and penalties of the regional store, in three regions (a
//! `redis-server` each, every link between them delayed 30 to 80 ms each
//! way by a proxy), with a second instance in south: a block made in one
//! region is answered in every region's instances once `block` returns; a
//! region cut off is named and repeating completes the change; denials
//! counted in different regions add up to the penalty's block; a flood of
//! denials keeps the relays within their cap. Then the UGC server's admin
//! routes in regions (`regional_control/ugc.rs`).

#[path = "regional_control/ugc.rs"]
mod ugc;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use limiter_core::{BlockOrigin, Blocks, Error, Penalties, Penalty};
use limiter_regional::{
    MAX_RELAYS_IN_FLIGHT, Region, RegionalConfig, RegionalStore, RegionsNotConfirmed,
};
use limiter_tests::RedisServer;
use limiter_tests::proxy::LatencyProxy;

const NAMES: [&str; 3] = ["north", "middle", "south"];
const NORTH: usize = 0;
const MIDDLE: usize = 1;
const SOUTH: usize = 2;
const MINUTE: Duration = Duration::from_secs(60);
/// Generous for a loaded test machine: the slowest link's round trip is
/// 160 ms.
const PEER_DEADLINE: Duration = Duration::from_secs(2);
/// How long a change relayed in the background may take to show in every
/// region: the slowest round trip (160 ms) for the relay, and as much
/// again for the block it earns (its write, its notice), with room for a
/// loaded machine.
const RELAY_BOUND: Duration = Duration::from_secs(2);

/// One world at a time: three servers and six proxies each.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn one_way(a: usize, b: usize) -> Duration {
    match (a.min(b), a.max(b)) {
        (0, 1) => Duration::from_millis(30),
        (1, 2) => Duration::from_millis(55),
        _ => Duration::from_millis(80),
    }
}

struct World {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    servers: Vec<RedisServer>,
    /// `links[(from, to)]`: how `from`'s stores reach `to`'s Redis.
    links: BTreeMap<(usize, usize), LatencyProxy>,
    /// North, middle, south, then a second instance in south.
    stores: Vec<RegionalStore>,
}

impl World {
    async fn start() -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let servers: Vec<RedisServer> = NAMES.iter().map(|_| RedisServer::start()).collect();
        let mut links = BTreeMap::new();
        for from in 0..NAMES.len() {
            for to in (0..NAMES.len()).filter(|&to| to != from) {
                let target = ([127, 0, 0, 1], servers[to].port()).into();
                let proxy = LatencyProxy::start(target, one_way(from, to)).await;
                links.insert((from, to), proxy);
            }
        }
        let config = RegionalConfig::new()
            .peer_deadline(PEER_DEADLINE)
            .local_deadline(Duration::from_secs(5))
            .connection_timeout(Duration::from_secs(2));
        let store = |here: usize| {
            let local = Region::open(NAMES[here], &servers[here].url()).unwrap();
            let peers = (0..NAMES.len())
                .filter(|&there| there != here)
                .map(|there| Region::open(NAMES[there], &links[&(here, there)].url()).unwrap());
            RegionalStore::with_config(local, peers, config.clone()).unwrap()
        };
        let stores = vec![store(NORTH), store(MIDDLE), store(SOUTH), store(SOUTH)];
        let world = Self {
            _turn: turn,
            servers,
            links,
            stores,
        };
        world.follow_blocks().await;
        world
    }

    /// Each instance follows its region's blocks, as a layer's does from
    /// its start: asked for its list, it subscribes to its region's notices.
    async fn follow_blocks(&self) {
        for store in &self.stores {
            store.block_list();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (region, server) in self.servers.iter().enumerate() {
            let instances = if region == SOUTH { 2 } else { 1 };
            while subscribers(server) < instances {
                assert!(
                    Instant::now() < deadline,
                    "{} not subscribed",
                    NAMES[region]
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Cuts every link to and from `region`.
    fn partition(&self, region: usize) {
        for (&(from, to), link) in &self.links {
            if from == region || to == region {
                link.partition();
            }
        }
    }

    fn heal(&self) {
        for link in self.links.values() {
            link.heal();
        }
    }

    /// What each instance answers for `key`'s block now: whether it is
    /// blocked for at most `duration`, at least `duration` less the time
    /// since `since` (and the store's millisecond).
    fn blocked(&self, key: &str, duration: Duration, since: Instant) -> Vec<bool> {
        let least = duration - since.elapsed() - Duration::from_millis(1);
        let within = |left: Duration| left >= least && left <= duration;
        self.stores
            .iter()
            .map(|store| store.blocked(key).is_some_and(within))
            .collect()
    }

    fn unblocked(&self, key: &str) -> Vec<bool> {
        (self.stores.iter())
            .map(|store| store.blocked(key).is_none())
            .collect()
    }
}

/// Subscribers to the notices on `server`.
fn subscribers(server: &RedisServer) -> u64 {
    let reply = server.command(&["PUBSUB", "NUMSUB", "limiter:resets"]);
    reply
        .lines()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Polls `every_instance` until it is all true, within `bound`.
async fn within(bound: Duration, mut every_instance: impl FnMut() -> Vec<bool>) -> Vec<bool> {
    let deadline = Instant::now() + bound;
    loop {
        let answers = every_instance();
        if answers.iter().all(|&answer| answer) || Instant::now() > deadline {
            return answers;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The regions `error` says did not confirm, and those that did.
fn regions_of(error: &Error) -> (Vec<String>, Vec<String>) {
    let Error::Backend(backend) = error else {
        panic!("not a backend error: {error:?}");
    };
    assert_eq!(backend.kind(), "region", "{error}");
    let missed = backend
        .downcast_ref::<RegionsNotConfirmed>()
        .unwrap_or_else(|| panic!("not the regions: {error}"));
    let names = |names: Vec<&str>| names.into_iter().map(str::to_owned).collect();
    (
        names(missed.not_confirmed().map(|(name, _)| name).collect()),
        names(missed.confirmed().collect()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_made_in_north_is_answered_in_every_region_once_block_returns() {
    let world = World::start().await;
    let north = &world.stores[NORTH];
    let started = Instant::now();
    north
        .block("api:k1", MINUTE, BlockOrigin::Operator)
        .await
        .unwrap();
    // South's second instance made no call: its region's notice told it.
    assert_eq!(world.blocked("api:k1", MINUTE, started), [true; 4]);
    assert_eq!(world.unblocked("api:k2"), [true; 4], "another key");
    north.unblock("api:k1").await.unwrap();
    assert_eq!(world.unblocked("api:k1"), [true; 4]);
    // Made in south's second instance, answered in north.
    let started = Instant::now();
    let south = &world.stores[3];
    south
        .block("api:k3", MINUTE, BlockOrigin::Operator)
        .await
        .unwrap();
    assert_eq!(world.blocked("api:k3", MINUTE, started), [true; 4]);
    let stats = north.stats();
    assert_eq!((stats.cross_region_writes, stats.remote_errors), (4, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_cut_off_is_named_and_repeating_the_change_completes_it() {
    let world = World::start().await;
    let north = &world.stores[NORTH];
    world.partition(SOUTH);
    let started = Instant::now();
    let error = north
        .block("api:k1", MINUTE, BlockOrigin::Operator)
        .await
        .unwrap_err();
    let (missed, made) = regions_of(&error);
    assert_eq!(
        (missed, made),
        (vec!["south".into()], vec!["north".into(), "middle".into()])
    );
    assert!(
        error.to_string().contains("not confirmed by region south"),
        "{error}"
    );
    // The regions reached keep it; south does not have it.
    assert_eq!(
        world.blocked("api:k1", MINUTE, started),
        [true, true, false, false]
    );
    world.heal();
    let started = Instant::now();
    north
        .block("api:k1", MINUTE, BlockOrigin::Operator)
        .await
        .unwrap();
    assert_eq!(world.blocked("api:k1", MINUTE, started), [true; 4]);

    world.partition(SOUTH);
    let error = north.unblock("api:k1").await.unwrap_err();
    let (missed, made) = regions_of(&error);
    assert_eq!(
        (missed, made),
        (vec!["south".into()], vec!["north".into(), "middle".into()])
    );
    assert_eq!(world.unblocked("api:k1"), [true, true, false, false]);
    world.heal();
    north.unblock("api:k1").await.unwrap();
    assert_eq!(world.unblocked("api:k1"), [true; 4]);
}

/// Three denials within a minute earn a block of 30 s.
fn three_strikes() -> Penalty {
    Penalty::new(3, MINUTE, [Duration::from_secs(30)]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn denials_in_north_and_south_add_up_to_the_penalty() {
    let world = World::start().await;
    let (north, south) = (&world.stores[NORTH], &world.stores[SOUTH]);
    let penalty = three_strikes();
    let (key, block_key) = ("api:k1:search:penalty", "api:k1");
    for _ in 0..2 {
        let earned = north.penalize_for(key, &penalty, block_key).await;
        assert_eq!(earned.unwrap(), None);
    }
    north.relays_idle().await;
    // South's first denial is the identity's third.
    let earned = south.penalize_for(key, &penalty, block_key).await;
    let block = Duration::from_secs(30);
    assert_eq!(earned.unwrap(), Some(block));
    // Its caller blocks it, as the HTTP layer does: answered here at once,
    // relayed to the others.
    let started = Instant::now();
    south
        .block(block_key, block, BlockOrigin::Penalty)
        .await
        .unwrap();
    assert!(south.blocked(block_key).is_some());
    let everywhere = within(RELAY_BOUND, || world.blocked(block_key, block, started)).await;
    assert_eq!(everywhere, [true; 4]);
    assert_eq!(north.stats().relays, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_earned_by_another_regions_count_reaches_every_region() {
    let world = World::start().await;
    let (north, south) = (&world.stores[NORTH], &world.stores[SOUTH]);
    let penalty = three_strikes();
    let (key, block_key) = ("api:k1:search:penalty", "api:k1");
    let started = Instant::now();
    // South's denial reaches north 80 ms later: after north's two, so it
    // is the third there, and the relay blocks the identity everywhere.
    let earned = south.penalize_for(key, &penalty, block_key).await;
    assert_eq!(earned.unwrap(), None);
    for _ in 0..2 {
        let earned = north.penalize_for(key, &penalty, block_key).await;
        assert_eq!(earned.unwrap(), None);
    }
    let block = Duration::from_secs(30);
    let everywhere = within(RELAY_BOUND, || world.blocked(block_key, block, started)).await;
    assert_eq!(everywhere, [true; 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_denials_keeps_the_relays_within_their_cap() {
    let world = World::start().await;
    let north = &world.stores[NORTH];
    // Nothing north relays gets through until the links heal: every relay
    // stays under way.
    world.partition(NORTH);
    let penalty = Penalty::new(1_000, MINUTE, [MINUTE]).unwrap();
    let flood = MAX_RELAYS_IN_FLIGHT + 100;
    let mut denials = tokio::task::JoinSet::new();
    for i in 0..flood {
        let (north, penalty) = (north.clone(), penalty.clone());
        denials.spawn(async move {
            north
                .penalize(&format!("flood:{i}:penalty"), &penalty)
                .await
        });
    }
    let answers = denials.join_all().await;
    // Every denial counted here, answered at once.
    assert!(answers.iter().all(|answer| matches!(answer, Ok(None))));
    assert_eq!(north.relays_in_flight(), MAX_RELAYS_IN_FLIGHT);
    let stats = north.stats();
    assert_eq!((stats.relays, stats.relays_dropped), (0, 100));
    world.heal();
    north.relays_idle().await;
    assert_eq!(north.relays_in_flight(), 0);
    assert_eq!(north.stats().relays, MAX_RELAYS_IN_FLIGHT as u64);
}
