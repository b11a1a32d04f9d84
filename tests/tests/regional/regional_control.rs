//! Blocks and penalties of the regional store, in three regions (a
//! `redis-server` each, every link between them delayed 30 to 80 ms each
//! way by a proxy), with a second instance in south: a block made in one
//! region is answered in every region's instances once `block` returns; a
//! region cut off is named and repeating completes the change; denials
//! counted in different regions add up to the penalty's block, through
//! the store and through a route's penalty; a flood of denials keeps the
//! relays within their cap. Then the UGC server's admin routes in regions
//! (`regional_control/ugc.rs`).

#[path = "regional_control/ugc.rs"]
mod ugc;
#[path = "regional_control/world.rs"]
mod world;

use std::time::{Duration, Instant};

use limiter_core::{Error, Penalty, SharedControl};
use limiter_regional::{MAX_RELAYS_IN_FLIGHT, RegionsNotConfirmed};
use limiter_tests::control::ControlCalls;
use world::{MINUTE, NORTH, RELAY_BOUND, SOUTH, Started, World};

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
    let started = Started::now();
    north.operator_block("api:k1", MINUTE).await.unwrap();
    // South's second instance made no call: its region's notice told it.
    assert_eq!(world.blocked("api:k1", MINUTE, started), [true; 4]);
    assert_eq!(world.unblocked("api:k2"), [true; 4], "another key");
    north.unblock("api:k1").await.unwrap();
    assert_eq!(world.unblocked("api:k1"), [true; 4]);
    // Made in south's second instance, answered in north.
    let started = Started::now();
    let south = &world.stores[3];
    south.operator_block("api:k3", MINUTE).await.unwrap();
    assert_eq!(world.blocked("api:k3", MINUTE, started), [true; 4]);
    let stats = north.stats();
    assert_eq!((stats.cross_region_calls, stats.remote_errors), (4, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_cut_off_is_named_and_repeating_the_change_completes_it() {
    let world = World::start().await;
    let north = &world.stores[NORTH];
    world.partition(SOUTH);
    let started = Started::now();
    let error = north.operator_block("api:k1", MINUTE).await.unwrap_err();
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
    let started = Started::now();
    north.operator_block("api:k1", MINUTE).await.unwrap();
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

/// A block or unblock a region did not confirm reaches it once it answers,
/// without the operator repeating it, within 10 s: cut off (what was sent
/// is lost), then with its Redis hung for 2 s and for 8 s (past the peer
/// deadline); an unblock that superseded a block the region missed is
/// what it gets, never the block after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_a_region_missed_reaches_it_once_it_answers() {
    const BOUND: Duration = Duration::from_secs(10);
    let world = World::start().await;
    let north = &world.stores[NORTH];

    // Cut off: the block never reached south.
    world.partition(SOUTH);
    let started = Started::now();
    let error = north.operator_block("api:cut", MINUTE).await.unwrap_err();
    assert_eq!(regions_of(&error).0, ["south"]);
    assert_eq!(
        world.blocked("api:cut", MINUTE, started),
        [true, true, false, false]
    );
    world.heal();
    let answers = within(BOUND, || world.blocked("api:cut", MINUTE, started)).await;
    assert_eq!(
        answers, [true; 4],
        "the block not in south within {BOUND:?}"
    );
    // The unblock south misses: it stays blocked until it gets it.
    world.partition(SOUTH);
    let error = north.unblock("api:cut").await.unwrap_err();
    assert_eq!(regions_of(&error).0, ["south"]);
    assert_eq!(world.unblocked("api:cut"), [true, true, false, false]);
    world.heal();
    let answers = within(BOUND, || world.unblocked("api:cut")).await;
    assert_eq!(
        answers, [true; 4],
        "the unblock not in south within {BOUND:?}"
    );

    // Hung: what was sent runs when it resumes, or is sent again.
    for hung in [Duration::from_secs(2), Duration::from_secs(8)] {
        let key = format!("api:hung-{}s", hung.as_secs());
        world.hang(SOUTH);
        let started = Started::now();
        // Confirmed or not, depending on when south answers.
        let _ = north.operator_block(&key, MINUTE).await;
        tokio::time::sleep_until((started.at + hung).into()).await;
        world.resume(SOUTH);
        let answers = within(BOUND, || world.blocked(&key, MINUTE, started)).await;
        assert_eq!(
            answers,
            [true; 4],
            "{key}: not in every region within {BOUND:?}: time left {:?}, {:?} since",
            world.lefts(&key),
            started.at.elapsed()
        );
    }

    // A block, then an unblock, both missed: south gets the unblock only.
    world.partition(SOUTH);
    north
        .operator_block("api:superseded", MINUTE)
        .await
        .unwrap_err();
    north.unblock("api:superseded").await.unwrap_err();
    world.heal();
    tokio::time::sleep(limiter_regional::REDELIVER_EVERY * 6).await;
    assert_eq!(world.unblocked("api:superseded"), [true; 4]);
}

/// Where `k1`'s denials of the search limit are counted for its penalty.
const PENALTY_KEY: &str = "api:k1:search:penalty";

/// Three denials within a minute earn a block of 30 s.
fn three_strikes() -> Penalty {
    Penalty::new(3, MINUTE, [Duration::from_secs(30)]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn denials_in_north_and_south_add_up_to_the_penalty() {
    let world = World::start().await;
    let (north, south) = (&world.stores[NORTH], &world.stores[SOUTH]);
    let (penalty, key, block_key) = (three_strikes(), PENALTY_KEY, "api:k1");
    for _ in 0..2 {
        let earned = north.penalize(key, &penalty, block_key).await;
        assert_eq!(earned.unwrap(), None);
    }
    north.relays_idle().await;
    // South's first denial is the identity's third.
    let earned = south.penalize(key, &penalty, block_key).await;
    let block = Duration::from_secs(30);
    assert_eq!(earned.unwrap(), Some(block));
    // Its caller blocks it, as the HTTP layer does: answered here at once,
    // relayed to the others.
    let started = Started::now();
    south.penalty_block(block_key, block).await.unwrap();
    assert!(south.blocked(block_key).is_some());
    let everywhere = within(RELAY_BOUND, || world.blocked(block_key, block, started)).await;
    assert_eq!(everywhere, [true; 4]);
    assert_eq!(north.stats().relays, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_earned_by_another_regions_count_reaches_every_region() {
    let world = World::start().await;
    let (north, south) = (&world.stores[NORTH], &world.stores[SOUTH]);
    let (penalty, key, block_key) = (three_strikes(), PENALTY_KEY, "api:k1");
    let started = Started::now();
    // South's denial reaches north 80 ms later: after north's two, so it
    // is the third there, and the relay blocks the identity everywhere.
    let earned = south.penalize(key, &penalty, block_key).await;
    assert_eq!(earned.unwrap(), None);
    for _ in 0..2 {
        let earned = north.penalize(key, &penalty, block_key).await;
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
            let key = format!("flood:{i}:penalty");
            north.penalize(&key, &penalty, &key).await
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

/// Sleeps into the next minute when less than 5 s of this one are left, so
/// a short test runs within one window of the servers' clock.
async fn within_one_minute() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let left = Duration::from_secs(60 - now.as_secs() % 60);
    if left < Duration::from_secs(5) {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_penalty_on_a_route_counts_its_denials_in_every_region() {
    use axum::Router;
    use axum::http::HeaderName;
    use axum::routing::get;
    use limiter_core::{GuardConfig, Identity, Limiter, Policy, Rule};
    use limiter_tests::http::{send, serve};
    use limiter_tower::{KeySource, LimitLayer, LimiterLayer};

    let world = World::start().await;
    let app = |region: usize| {
        // A share of one a minute in each region.
        let one_a_minute = Policy::fixed_window(Rule::new(3, MINUTE).unwrap());
        let api_key = KeySource::header(HeaderName::from_static("x-api-key"));
        let limit = LimitLayer::new("search", one_a_minute, api_key).penalty(three_strikes());
        let guard = GuardConfig {
            deadline: Duration::from_secs(5),
            ..GuardConfig::default()
        };
        let layer = LimiterLayer::new(Limiter::new(world.stores[region].clone())).guard(guard);
        let control = layer.control();
        let router = Router::new()
            .route("/api/search", get(|| async { "results" }).layer(limit))
            .layer(layer);
        (router, control)
    };
    let ((north_app, north), (south_app, south)) = (app(NORTH), app(SOUTH));
    let (north_addr, south_addr) = (serve(north_app).await, serve(south_app).await);
    let search = |addr| async move {
        let response = send(addr, "GET", "/api/search", &[("x-api-key", b"k1")], b"").await;
        let response = response.unwrap();
        let problem: serde_json::Value = serde_json::from_str(&response.body).unwrap_or_default();
        let blocked = problem["type"] == limiter_tower::BLOCKED;
        (response.status, blocked)
    };
    within_one_minute().await;
    // North uses its share, asks for the others' (idle, they give them),
    // and uses them: the quota is used, every region's lease spent.
    for _ in 0..3 {
        assert_eq!(search(north_addr).await, (200, false));
        for store in &world.stores {
            store.idle().await;
        }
    }
    // South's denial reaches north 80 ms later, after north's two: the
    // third there, so the relay blocks the key, as the layer names it.
    let denials = [
        search(south_addr).await,
        search(north_addr).await,
        search(north_addr).await,
    ];
    assert_eq!(denials, [(429, false); 3]);
    // Read without a request, which would be a denial of its own.
    let k1 = Identity::header("x-api-key", "k1");
    let blocked = || vec![north.blocked(&k1).is_some(), south.blocked(&k1).is_some()];
    assert_eq!(within(RELAY_BOUND, blocked).await, [true; 2]);
    let answers = [search(north_addr).await, search(south_addr).await];
    assert_eq!(answers, [(429, true); 2]);
}
