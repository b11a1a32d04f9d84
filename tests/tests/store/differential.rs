//! Differential property test: random traces of (time step, key, cost) go
//! through the memory store, the Redis store (given the same timestamps) and
//! the reference model of the conformance suite
//! (`limiter_conformance::KeyModel`), for every algorithm; every field
//! of every decision must be equal. Proptest shrinks a failing trace here;
//! the conformance runners replay fixed traces.

#[path = "differential/params.rs"]
pub(crate) mod params;

use std::sync::atomic::{AtomicU64, Ordering};

use limiter_conformance::{KeyModel, Outcome, Params};
use limiter_core::{Decision, ManualClock, MemoryStore, Policy};
use limiter_redis::RedisStore;
use limiter_tests::TestRedis;
use limiter_tests::at::At;
use limiter_tests::property::{each_case, each_case_on};
use params::{params, window};
use proptest::prelude::*;

const T0: u64 = 1_750_000_000_000_000;
const KEYS: usize = 3;
const CASES: u32 = 96;

#[derive(Debug, Clone)]
struct Step {
    advance_us: u64,
    key: usize,
    cost: u64,
}

/// A trace whose steps are mostly small (many decisions inside one window)
/// with some long gaps (windows passing, buckets refilling).
fn case() -> impl Strategy<Value = (Params, u64, Vec<Step>)> {
    (params(), 0u64..1_000_000_000).prop_flat_map(|(params, start)| {
        let longest = params.span_us();
        let step = (
            prop_oneof![
                3 => Just(0u64),
                4 => 0..=longest / 4,
                2 => 0..=longest * 2,
                2 => params::edge(&params),
            ],
            0..KEYS,
            prop_oneof![3 => Just(1u64), 1 => 1..=params.max_cost()],
        )
            .prop_map(|(advance_us, key, cost)| Step {
                advance_us,
                key,
                cost,
            });
        (
            Just(params),
            Just(start),
            prop::collection::vec(step, 1..60),
        )
    })
}

async fn run_case(
    redis: &At<RedisStore>,
    prefix: &str,
    (params, start, steps): (Params, u64, Vec<Step>),
) -> Result<(), TestCaseError> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let case = CASE.fetch_add(1, Ordering::Relaxed);
    let policy = params.policy();
    let mut reference = Reference::new(KEYS);
    let mut now = T0 + start;
    for (i, step) in steps.iter().enumerate() {
        now += step.advance_us;
        let name = format!("{prefix}:case{case}:k{}", step.key);
        let from_redis = redis
            .check_at(&name, &policy, step.cost, now)
            .await
            .unwrap();
        let at = format_args!("step {i} ({step:?})");
        reference.agrees(
            (&policy, &params),
            (step.key, &name),
            (step.cost, now),
            &from_redis,
            at,
        )?;
    }
    Ok(())
}

/// The memory store and the reference model, deciding beside a Redis
/// store on the same timestamps.
pub(crate) struct Reference {
    memory: At<MemoryStore<ManualClock>>,
    models: Vec<KeyModel>,
}

impl Reference {
    pub(crate) fn new(keys: usize) -> Self {
        Self {
            memory: At::memory(),
            models: vec![KeyModel::default(); keys],
        }
    }

    /// The memory store decides `name` (the `key`th) as the model does,
    /// and the Redis store decided as the memory store: every field.
    pub(crate) fn agrees(
        &mut self,
        (policy, params): (&Policy, &Params),
        (key, name): (usize, &str),
        (cost, now): (u64, u64),
        from_redis: &Decision,
        at: std::fmt::Arguments<'_>,
    ) -> Result<(), TestCaseError> {
        let from_memory = self.memory.decide_at(name, policy, cost, now).unwrap();
        let expected = self.models[key].check(params, now, cost);
        prop_assert_eq!(
            &Outcome::of(&from_memory),
            &expected,
            "memory vs model at {}",
            at
        );
        prop_assert_eq!(from_redis, &from_memory, "redis vs memory at {}", at);
        Ok(())
    }
}

#[test]
fn memory_redis_and_the_model_agree_on_every_decision() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let test_redis: TestRedis = limiter_tests::redis();
    let redis = runtime.block_on(clocked(&test_redis));
    each_case_on(&runtime, CASES * 5, case(), |case| {
        run_case(&redis, test_redis.prefix(), case)
    });
}

#[test]
fn memory_redis_cluster_and_the_model_agree_on_every_decision() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cluster = limiter_tests::RedisCluster::start();
    let (config, clock) = limiter_tests::at::clocked(limiter_tests::at::patient());
    let store = runtime.block_on(cluster.store_with(config));
    let redis = At { store, clock };
    each_case_on(&runtime, CASES * 2, case(), |case| {
        run_case(&redis, "cluster", case)
    });
}

/// Two plans a key can move between: one algorithm (sliding windows of one
/// length, buckets of one kind), any other parameters.
fn plan_pair() -> impl Strategy<Value = (Params, Params)> {
    prop_oneof![
        (
            prop::collection::vec((1u64..7, window()), 1..4),
            prop::collection::vec((1u64..7, window()), 1..4)
        )
            .prop_map(|(a, b)| (Params::SlidingLog(a), Params::SlidingLog(b))),
        ((1u64..7, window()), (1u64..7, window())).prop_map(|((l1, w1), (l2, w2))| (
            Params::FixedWindow(l1, w1),
            Params::FixedWindow(l2, w2)
        )),
        (1u64..9, 1u64..9, window())
            .prop_map(|(l1, l2, w)| (Params::SlidingWindow(l1, w), Params::SlidingWindow(l2, w))),
        (
            (1u64..11, window(), 1u64..7),
            (1u64..11, window(), 1u64..7),
            any::<bool>()
        )
            .prop_map(|((a1, p1, c1), (a2, p2, c2), pacing)| (
                Params::Bucket(a1, p1, c1, pacing),
                Params::Bucket(a2, p2, c2, pacing)
            )),
        ((1u64..11, window(), 1u64..7), (1u64..11, window(), 1u64..7)).prop_map(
            |((a1, p1, b1), (a2, p2, b2))| (Params::Gcra(a1, p1, b1), Params::Gcra(a2, p2, b2))
        ),
    ]
}

/// A key's plan changes between requests (a plan changed at run time): the
/// state it carries is read under the other policy as the policies define,
/// by both stores and the model alike.
#[test]
fn memory_redis_and_the_model_agree_when_plans_change() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let test_redis: TestRedis = limiter_tests::redis();
    let redis = runtime.block_on(clocked(&test_redis));
    let case = plan_pair().prop_flat_map(|(a, b)| {
        let longest = a.span_us().max(b.span_us());
        let cost = a.max_cost().min(b.max_cost());
        let step = (
            prop_oneof![
                3 => Just(0u64),
                4 => 0..=longest / 4,
                2 => 0..=longest * 2,
                2 => params::edge(&a),
            ],
            0..KEYS,
            prop_oneof![3 => Just(1u64), 1 => 1..=cost],
            any::<bool>(),
        );
        (Just((a, b)), prop::collection::vec(step, 1..60))
    });
    static CASE: AtomicU64 = AtomicU64::new(0);
    each_case(CASES * 3, case, |((a, b), steps)| {
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let plans = [(a.policy(), a), (b.policy(), b)];
        let mut reference = Reference::new(KEYS);
        let mut now = T0;
        for (i, &(advance_us, key, cost, second)) in steps.iter().enumerate() {
            now += advance_us;
            let (policy, params) = &plans[usize::from(second)];
            let name = format!("{}:plans{case}:k{key}", test_redis.prefix());
            let from_redis = runtime
                .block_on(redis.check_at(&name, policy, cost, now))
                .unwrap();
            let at =
                format_args!("step {i} (plan {second}, {advance_us} µs, key {key}, cost {cost})");
            reference.agrees((policy, params), (key, &name), (cost, now), &from_redis, at)?;
        }
        Ok(())
    });
}

/// The sliding log when the clock steps back (a Redis failover to a node
/// whose clock is behind, or instances whose clocks disagree): entries later
/// than now count, and the reset time runs from the newest entry. The model
/// above follows time forward only; here the Redis store is held to the
/// memory store, field by field, on traces that also step back.
#[test]
fn memory_and_redis_agree_when_the_clock_steps_back() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let test_redis: TestRedis = limiter_tests::redis();
    let redis = runtime.block_on(clocked(&test_redis));
    let case = prop::collection::vec((1u64..7, window()), 1..4).prop_flat_map(|rules| {
        let longest = rules.iter().map(|r| r.1).max().unwrap() as i64;
        let tightest = rules.iter().map(|r| r.0).min().unwrap();
        let step = (
            prop_oneof![
                2 => Just(0i64),
                3 => 0..=longest / 4,
                3 => -longest..0,
                1 => 0..=longest * 2,
            ],
            0..KEYS,
            prop_oneof![3 => Just(1u64), 1 => 1..=tightest],
        );
        (Just(rules), prop::collection::vec(step, 1..60))
    });
    static CASE: AtomicU64 = AtomicU64::new(0);
    each_case(CASES, case, |(rules, steps)| {
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let policy = Params::SlidingLog(rules).policy();
        let memory = At::memory();
        let mut now = T0;
        for (i, &(step, key, cost)) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step);
            let key = format!("{}:back{case}:k{key}", test_redis.prefix());
            let from_memory = memory.decide_at(&key, &policy, cost, now).unwrap();
            let from_redis = runtime
                .block_on(redis.check_at(&key, &policy, cost, now))
                .unwrap();
            prop_assert_eq!(
                from_redis,
                from_memory,
                "redis vs memory at step {} ({}, {}, {})",
                i,
                step,
                key,
                cost
            );
        }
        Ok(())
    });
}

/// A store of `redis` on a clock of its own.
async fn clocked(redis: &TestRedis) -> At<RedisStore> {
    At::redis(redis.url(), limiter_tests::at::patient()).await
}
