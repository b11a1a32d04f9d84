//! How regions share a window's quota, on three `redis-server` processes
//! at times the tests choose (a manual clock), each ask waited for (`idle`)
//! where the test says so: exact outcomes, no timing.

use std::time::Duration;

use limiter_core::{Decision, Error, Key, KeyState, ManualClock, Policy, Rule};
use limiter_regional::{Region, RegionalConfig, RegionalStore, RegionsNotConfirmed};
use limiter_tests::RedisServer;
use limiter_tests::at::At;

const QUOTA: u64 = 30;
const W: u64 = 1_000_000;
/// A window start, a multiple of the window.
const BASE: u64 = 1_700_000_000_000_000;
/// By name: middle 0, north 1, south 2; shares 10 each.
const NAMES: [&str; 3] = ["north", "middle", "south"];

struct World {
    _servers: Vec<RedisServer>,
    /// Each region's store, on one clock.
    stores: Vec<At<RegionalStore>>,
}

/// The tests' settings, on `clock`.
fn config(clock: &ManualClock) -> RegionalConfig {
    RegionalConfig::new()
        .local_deadline(Duration::from_secs(5))
        .peer_deadline(Duration::from_secs(2))
        .manual_clock(clock.clone())
}

impl World {
    fn start() -> Self {
        let servers: Vec<RedisServer> = NAMES.iter().map(|_| RedisServer::start()).collect();
        let clock = ManualClock::default();
        let stores = (0..NAMES.len())
            .map(|here| {
                let local = Region::open(NAMES[here], &servers[here].url()).unwrap();
                let peers = (0..NAMES.len())
                    .filter(|&there| there != here)
                    .map(|there| Region::open(NAMES[there], &servers[there].url()).unwrap());
                let store = RegionalStore::with_config(local, peers, config(&clock)).unwrap();
                At {
                    store,
                    clock: clock.clone(),
                }
            })
            .collect();
        Self {
            _servers: servers,
            stores,
        }
    }

    async fn idle(&self) {
        for store in &self.stores {
            store.idle().await;
        }
    }
}

fn fixed() -> Policy {
    Policy::fixed_window(Rule::new(QUOTA, Duration::from_micros(W)).unwrap())
}

fn sliding() -> Policy {
    Policy::sliding_window(Rule::new(QUOTA, Duration::from_micros(W)).unwrap())
}

async fn check(store: &At<RegionalStore>, key: &str, policy: &Policy, at: u64) -> Decision {
    store.check_at(key, policy, 1, at).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_region_gets_the_whole_quota_once_its_ask_is_answered() {
    let world = World::start();
    let north = &world.stores[0];
    let policy = fixed();
    let mut admitted = 0;
    // One request every 10 ms; each ask answered before the next request.
    for i in 0..40 {
        let decision = check(north, "lone", &policy, BASE + i * 10_000).await;
        world.idle().await;
        if i < 4 {
            // Within its own share (10) and below half of it: no ask yet.
            assert_eq!(decision.remaining(), 9 - i, "request {i}");
        }
        if i == 4 {
            // Half its share spent: it asked, and both others gave theirs.
            assert_eq!(north.stats().asks, 1);
            assert_eq!(north.stats().received, 20);
            assert_eq!(decision.remaining(), 5);
        }
        admitted += u64::from(decision.allowed());
        assert_eq!(decision.allowed(), i < 30, "request {i}");
        assert_eq!(decision.limit(), QUOTA);
    }
    assert_eq!(admitted, QUOTA);
    // What each knows of the counts across regions: north learned the
    // others' (0) when they gave; they learned north's from its asks, the
    // last when its lease was spent (30).
    let at = BASE + 500_000;
    let known = north.now(at).known_counts("lone", &policy).await.unwrap();
    assert_eq!(
        (known.here, known.lease, known.total()),
        (QUOTA, QUOTA, QUOTA)
    );
    let others: Vec<(String, Option<u64>)> =
        vec![("middle".into(), Some(0)), ("south".into(), Some(0))];
    assert_eq!(known.others, others);
    let middle = world.stores[1]
        .now(at)
        .known_counts("lone", &policy)
        .await
        .unwrap();
    assert_eq!((middle.here, middle.lease), (0, 0));
    assert_eq!(
        middle.others,
        [
            ("north".to_owned(), Some(QUOTA)),
            ("south".to_owned(), None)
        ]
    );
    // The others gave their shares: a request there is denied this window.
    let middle = check(&world.stores[1], "lone", &policy, BASE + 500_000).await;
    assert!(!middle.allowed());
    // The next window, every region holds its share again.
    let next = check(&world.stores[1], "lone", &policy, BASE + W).await;
    assert_eq!(next.remaining(), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_regions_keep_their_shares_and_split_the_idle_ones() {
    let world = World::start();
    let (north, south) = (&world.stores[0], &world.stores[2]);
    let policy = fixed();
    let (mut from_north, mut from_south) = (0, 0);
    // Both at 100 a second, middle idle; asks answered between rounds.
    for i in 0..100 {
        let at = BASE + i * 10_000;
        from_north += u64::from(check(north, "two", &policy, at).await.allowed());
        from_south += u64::from(check(south, "two", &policy, at + 1).await.allowed());
        world.idle().await;
    }
    // The quota, exactly: each kept its share while it needed it, and
    // middle's went to whoever asked first.
    assert_eq!(from_north + from_south, QUOTA);
    assert!(
        from_north >= 10 && from_south >= 10,
        "{from_north} + {from_south}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_traffic_everywhere_never_passes_the_quota() {
    let world = World::start();
    let policy = fixed();
    // Every region at once, a burst per ms, asks running in the background
    // and answered whenever they are: per window never more than the quota.
    for window in 0..5u64 {
        let start = BASE + window * W;
        let mut tasks = tokio::task::JoinSet::new();
        for ms in 0..60u64 {
            for (region, store) in world.stores.iter().enumerate() {
                // Uneven: north twice as busy, south only in the second half.
                let burst = [2, 1, u64::from(ms >= 30) * 3][region];
                for _ in 0..burst {
                    let (store, policy) = (store.clone(), policy.clone());
                    let at = start + ms * 15_000 + region as u64;
                    tasks.spawn(async move { store.check_at("all", &policy, 1, at).await });
                }
            }
            if ms % 7 == 0 {
                tokio::task::yield_now().await;
            }
        }
        let mut admitted = 0;
        while let Some(decision) = tasks.join_next().await {
            admitted += u64::from(decision.unwrap().unwrap().allowed());
        }
        world.idle().await;
        assert!(admitted <= QUOTA, "window {window}: {admitted} admitted");
        // 360 requests against 30: the shares given are used.
        assert!(admitted >= 20, "window {window}: only {admitted} admitted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sliding_window_counter_shares_exactly_too() {
    let world = World::start();
    let north = &world.stores[0];
    let policy = sliding();
    let mut per_window = Vec::new();
    for window in 0..3u64 {
        let mut admitted = 0;
        for i in 0..100 {
            let decision = check(north, "sliding", &policy, BASE + window * W + i * 10_000).await;
            world.idle().await;
            admitted += u64::from(decision.allowed());
        }
        per_window.push(admitted);
    }
    // The first window the whole quota; later ones what the previous
    // window's weight leaves, as one region alone would: the estimate of
    // 30 spread over the first 290 ms falls below 30 - 1 at a pace.
    assert_eq!(per_window[0], QUOTA);
    let alone = {
        let server = RedisServer::start();
        let clock = ManualClock::default();
        let north = Region::open("north", &server.url()).unwrap();
        let only = At {
            store: RegionalStore::with_config(north, [], config(&clock)).unwrap(),
            clock,
        };
        let mut counts = Vec::new();
        for window in 0..3u64 {
            let mut admitted = 0;
            for i in 0..100 {
                let at = BASE + window * W + i * 10_000;
                admitted += u64::from(check(&only, "sliding", &policy, at).await.allowed());
            }
            counts.push(admitted);
        }
        counts
    };
    // A region short of its lease at a window's start is denied until its
    // ask is answered, which here is before the next request: the same
    // counts as a single region holding the whole quota.
    assert_eq!(per_window, alone);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_reaches_every_region_and_keeps_the_leases() {
    let world = World::start();
    let policy = fixed();
    let at = BASE + 100_000;
    let mut admitted = [0u64; 3];
    for _ in 0..10 {
        for region in [0, 2] {
            let decision = check(&world.stores[region], "reset", &policy, at).await;
            admitted[region] += u64::from(decision.allowed());
        }
    }
    world.idle().await;
    let peek = |region: usize| {
        let (store, policy) = (world.stores[region].clone(), policy.clone());
        async move {
            store
                .now(at)
                .peek(&Key::from("reset"), &policy, 1)
                .await
                .unwrap()
        }
    };
    // A region's lease: what it counted, and what remains of it besides
    // the request a peek asks about.
    let lease =
        |counted: u64, peek: Decision| counted + peek.remaining() + u64::from(peek.allowed());
    let mut leases = [0u64; 3];
    for (region, held) in leases.iter_mut().enumerate() {
        *held = lease(admitted[region], peek(region).await);
    }
    assert_eq!(
        leases.iter().sum::<u64>(),
        QUOTA,
        "leases {leases:?}, admitted {admitted:?}"
    );
    assert_eq!(admitted, [10, 0, 10]);
    world.stores[0]
        .reset(&Key::from("reset"), &fixed())
        .await
        .unwrap();
    // The counts are gone in every region, the leases kept.
    for (region, held) in leases.into_iter().enumerate() {
        assert_eq!(lease(0, peek(region).await), held, "region {region}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_names_the_region_it_could_not_reach() {
    let server = RedisServer::start();
    let north = Region::open("north", &server.url()).unwrap();
    let gone = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    let south = Region::open("south", &gone).unwrap();
    let clock = ManualClock::default();
    let config = config(&clock).peer_deadline(Duration::from_millis(300));
    let store = At {
        store: RegionalStore::with_config(north, [south], config).unwrap(),
        clock,
    };
    let policy = fixed();
    check(&store, "cut", &policy, BASE).await;
    let error = store.reset(&Key::from("cut"), &policy).await.unwrap_err();
    let Error::Backend(backend) = &error else {
        panic!("not a backend error: {error}");
    };
    assert_eq!(backend.kind(), "region");
    let missed = backend.downcast_ref::<RegionsNotConfirmed>().unwrap();
    let not_confirmed: Vec<&str> = missed.not_confirmed().map(|(name, _)| name).collect();
    assert_eq!(not_confirmed, ["south"]);
    assert_eq!(missed.confirmed().collect::<Vec<_>>(), ["north"]);
    // North holds it.
    let peek = store
        .now(BASE)
        .peek(&Key::from("cut"), &policy, 1)
        .await
        .unwrap();
    assert_eq!(peek.remaining(), 15 - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_is_given_back_where_it_was_counted() {
    let world = World::start();
    let north = &world.stores[0];
    let policy = fixed();
    let (at, refund) = (BASE + 100_000, Key::from("refund"));
    let (first, receipt) = north
        .now(at)
        .check_refundable(&refund, &policy, 1)
        .await
        .unwrap();
    assert_eq!(first.remaining(), 9);
    north
        .refund(&refund, &policy, &receipt.unwrap())
        .await
        .unwrap();
    let peek = north.now(at).peek(&refund, &policy, 1).await.unwrap();
    assert_eq!(peek.remaining(), 9, "the refunded request is not counted");
    // A refund of a window that is over gives nothing back.
    let (_, old) = north
        .now(at)
        .check_refundable(&refund, &policy, 1)
        .await
        .unwrap();
    check(north, "refund", &policy, BASE + 2 * W).await;
    north.refund(&refund, &policy, &old.unwrap()).await.unwrap();
    let later = north
        .now(BASE + 2 * W)
        .peek(&refund, &policy, 1)
        .await
        .unwrap();
    assert_eq!(later.remaining(), 8);
}
