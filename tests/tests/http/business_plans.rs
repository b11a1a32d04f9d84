//! Plans changed while requests come in, on both stores and every
//! algorithm: a key's state carries over, so lowering its limit admits no
//! more than the new limit in the current window, and raising it admits
//! exactly the difference.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use limiter_core::{Algorithm, Key, MemoryStore, Plan, Plans, Policy, Rate, Rule, Store};
use limiter_tests::redis;
use tokio::task::JoinSet;

const FREE: u64 = 10;
const PRO: u64 = 100;

/// The policy of `limit` per long window (nothing leaves it, no bucket
/// drains a whole request, during the test) for `algorithm`.
fn policy(algorithm: Algorithm, limit: u64) -> Policy {
    let hour = Duration::from_secs(3_600);
    // A slow rate: one request drains in 36 s at the lowest limit.
    let rate = Rate::new(limit, hour).unwrap();
    match algorithm {
        Algorithm::SlidingLog => Policy::sliding_log([Rule::new(limit, hour).unwrap()]).unwrap(),
        Algorithm::FixedWindow => Policy::fixed_window(Rule::new(limit, hour).unwrap()),
        Algorithm::SlidingWindow => {
            Policy::sliding_window(Rule::new(limit, limiter_core::MAX_WINDOW).unwrap())
        }
        Algorithm::TokenBucket => Policy::token_bucket(rate, limit).unwrap(),
        Algorithm::LeakyBucket => Policy::leaky_bucket(rate, limit).unwrap(),
        Algorithm::Gcra => Policy::gcra(rate, limit).unwrap(),
    }
}

const ALGORITHMS: [Algorithm; 6] = Algorithm::ALL;

fn plans(algorithm: Algorithm) -> Plans {
    Plans::new([
        Plan::new("free", policy(algorithm, FREE)).unwrap(),
        Plan::new("pro", policy(algorithm, PRO)).unwrap(),
    ])
    .unwrap()
}

/// `requests` checks of `key` at once, each under the policy its plan has
/// when it is checked; answers how many were allowed.
async fn load<S: Store + Clone>(
    store: &S,
    plans: &Plans,
    plan: &str,
    key: &str,
    requests: usize,
) -> usize {
    let mut tasks = JoinSet::new();
    for _ in 0..requests {
        let (store, plans, plan, key) = (
            store.clone(),
            plans.clone(),
            plan.to_owned(),
            Key::from(key),
        );
        tasks.spawn(async move {
            let plan = plans.get(&plan).unwrap();
            let policy = plan.policy().unwrap();
            store.check(&key, policy, 1).await.unwrap().allowed()
        });
    }
    tasks.join_all().await.into_iter().filter(|a| *a).count()
}

/// Lowers and raises one key's limit, for every algorithm, with exact counts.
async fn lowering_admits_only_what_the_new_limit_leaves<S: Store + Clone>(store: S, prefix: &str) {
    for algorithm in ALGORITHMS {
        let key = format!("{prefix}:{algorithm}:lowered");
        // The key's plan goes from pro to free after 4 requests.
        let plans = plans(algorithm);
        assert_eq!(load(&store, &plans, "pro", &key, 4).await, 4, "{algorithm}");
        assert_eq!(
            load(&store, &plans, "free", &key, 100).await,
            (FREE - 4) as usize,
            "{algorithm}: the 4 counted under pro count under free"
        );
        // Back to pro: exactly what pro leaves of the 10 counted.
        assert_eq!(
            load(&store, &plans, "pro", &key, 200).await,
            (PRO - FREE) as usize,
            "{algorithm}: raised"
        );
        // The plan itself changes: pro becomes 50, and the key has 100.
        plans
            .insert(Plan::new("pro", policy(algorithm, 50)).unwrap())
            .unwrap();
        assert_eq!(
            load(&store, &plans, "pro", &key, 100).await,
            0,
            "{algorithm}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lowering_a_limit_admits_only_what_it_leaves_in_memory_and_on_redis() {
    lowering_admits_only_what_the_new_limit_leaves(MemoryStore::new(), "memory").await;
    let redis = redis();
    lowering_admits_only_what_the_new_limit_leaves(redis.store().await, redis.prefix()).await;
}

/// Requests keep coming while the key's plan is lowered from pro to free
/// after the 20th answer: whatever was admitted meanwhile, once the change is
/// seen, free admits nothing more (20 or more are counted, above its 10).
async fn a_plan_lowered_under_load_admits_nothing_above_it<S: Store + Clone>(
    store: S,
    prefix: &str,
) {
    for algorithm in ALGORITHMS {
        let key = format!("{prefix}:{algorithm}:under-load");
        let plans = plans(algorithm);
        let table = Arc::new(std::sync::Mutex::new("pro"));
        let answered = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..64 {
            let (store, plans, key) = (store.clone(), plans.clone(), Key::from(&key));
            let (table, answered) = (Arc::clone(&table), Arc::clone(&answered));
            tasks.spawn(async move {
                let name = *table.lock().unwrap();
                let plan = plans.get(name).unwrap();
                let allowed = store
                    .check(&key, plan.policy().unwrap(), 1)
                    .await
                    .unwrap()
                    .allowed();
                if answered.fetch_add(1, Ordering::SeqCst) + 1 == 20 {
                    *table.lock().unwrap() = "free";
                }
                allowed
            });
        }
        let during = tasks.join_all().await.into_iter().filter(|a| *a).count();
        assert!((20..=64).contains(&during), "{algorithm}: {during}");
        assert_eq!(
            load(&store, &plans, "free", &key, 100).await,
            0,
            "{algorithm}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plan_lowered_under_load_admits_nothing_above_it_in_memory_and_on_redis() {
    a_plan_lowered_under_load_admits_nothing_above_it(MemoryStore::new(), "memory").await;
    let redis = redis();
    a_plan_lowered_under_load_admits_nothing_above_it(redis.store().await, redis.prefix()).await;
}

#[tokio::test]
async fn a_bucket_keeps_its_requests_through_a_change_of_rate_on_both_stores() {
    // Pro drains a request in 0.6 s, free in 6 s; times given to both stores.
    let minute = Duration::from_secs(60);
    let pro = Policy::token_bucket(Rate::new(100, minute).unwrap(), 100).unwrap();
    let free = Policy::token_bucket(Rate::new(10, minute).unwrap(), 10).unwrap();
    let redis = redis();
    let stores = [
        limiter_tests::TimedStore::memory(),
        limiter_tests::TimedStore::redis(&redis).await,
    ];
    let t0 = 1_750_000_000_000_000;
    for store in &stores {
        let key = redis.key(&format!("{}:bucket", store.name()));
        for _ in 0..4 {
            assert!(store.check_at(&key, &pro, 1, t0).await.unwrap().allowed());
        }
        assert!(
            store
                .check_at(&key, &pro, 1, t0 + 300_000)
                .await
                .unwrap()
                .allowed()
        );
        // 4.5 requests of water: the half counts whole under free, 4 remain.
        let d = store.check_at(&key, &free, 1, t0 + 300_000).await.unwrap();
        assert_eq!((d.allowed(), d.remaining()), (true, 4), "{}", store.name());
        let d = store.check_at(&key, &pro, 1, t0 + 300_000).await.unwrap();
        assert_eq!((d.allowed(), d.remaining()), (true, 93), "{}", store.name());
        // Thirty requests of water in a bucket of ten: full, one request
        // drains in 6 s at the new rate.
        let key = redis.key(&format!("{}:overflow", store.name()));
        for _ in 0..30 {
            store.check_at(&key, &pro, 1, t0).await.unwrap();
        }
        let denied = store.check_at(&key, &free, 1, t0).await.unwrap();
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_secs(6)),
            "{}",
            store.name()
        );
        let allowed = store
            .check_at(&key, &free, 1, t0 + 6_000_000)
            .await
            .unwrap();
        assert_eq!((allowed.allowed(), allowed.remaining()), (true, 0));
    }
}
