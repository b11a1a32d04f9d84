//! Every wrapping of every store (`Guarded`, `HotKeys`, and each nesting of
//! two) answers what the store it wraps answers: the same capabilities, no
//! more and no fewer, the same place on the network and failure domains, a
//! deadline wherever the store has one, and each capability reached
//! through the wrapper does what the store does.

use std::collections::BTreeSet;
use std::time::Duration;

use limiter_core::{
    Capabilities, Change, ConcurrencyLimit, Decision, Error, GuardConfig, Guarded, HotKeys, Key,
    KeyState, MemoryStore, Override, Penalty, Permits, Policy, Rule, SharedControl, Store,
    async_trait,
};
use limiter_redis::RedisStore;
use limiter_regional::{Region, RegionalConfig, RegionalStore};
use limiter_tests::control::ControlCalls;
use limiter_tests::{RedisCluster, RedisServer};

/// The policy's quota: 5 requests per minute, as a sliding log (exact, and
/// refundable), long enough that no request leaves it during a case.
const LIMIT: u64 = 5;

/// The guard's deadline: longer than the Redis store's own (5 s, which the
/// guard keeps), so both ways of choosing are seen.
const GUARD_DEADLINE: Duration = Duration::from_secs(10);

/// How many keys the failure domains are compared on.
const SPREAD: usize = 32;

/// The policy the capabilities are called with: the default algorithm,
/// or the sliding window counter for a store that does not run it (the
/// regional store).
fn policy(sliding_log: bool) -> Policy {
    let rule = Rule::new(LIMIT, Duration::from_secs(60)).unwrap();
    if sliding_log {
        Policy::sliding_log([rule]).unwrap()
    } else {
        Policy::sliding_window(rule)
    }
}

/// A store as a trait object that also checks, for the capability calls
/// whose outcome a check shows (a reset).
#[async_trait]
trait Checked: Capabilities {
    async fn check_one(&self, key: &str, policy: &Policy) -> Result<Decision, Error>;
}

#[async_trait]
impl<S: Store> Checked for S {
    async fn check_one(&self, key: &str, policy: &Policy) -> Result<Decision, Error> {
        self.check(&Key::from(key), policy, 1).await
    }
}

fn guard<S: Store>(store: S) -> Guarded<S> {
    let config = GuardConfig {
        deadline: GUARD_DEADLINE,
        ..GuardConfig::default()
    };
    Guarded::new(store, config)
}

/// Each wrapping, named with `_` for the store, around a clone of `store`
/// (clones share the store's state and connections).
fn wrappings<S: Store + Clone>(store: &S) -> [(&'static str, Box<dyn Checked>); 7] {
    let s = || store.clone();
    [
        ("_", Box::new(s())),
        ("Guarded<_>", Box::new(guard(s()))),
        ("HotKeys<_>", Box::new(HotKeys::new(s()))),
        ("Guarded<HotKeys<_>>", Box::new(guard(HotKeys::new(s())))),
        ("HotKeys<Guarded<_>>", Box::new(HotKeys::new(guard(s())))),
        (
            "HotKeys<HotKeys<_>>",
            Box::new(HotKeys::new(HotKeys::new(s()))),
        ),
        ("Guarded<Guarded<_>>", Box::new(guard(guard(s())))),
    ]
}

/// Which capability traits `store` answers, by name.
fn presence(store: &dyn Capabilities) -> [(&'static str, bool); 4] {
    [
        ("KeyState", store.as_key_state().is_some()),
        ("Permits", store.as_permits().is_some()),
        ("Leases", store.as_leases().is_some()),
        ("SharedControl", store.as_shared_control().is_some()),
    ]
}

/// A store under test: its name in failures, the capabilities it has, the
/// prefix of its keys, and whether a key's failure domain is its node.
struct Subject<'a> {
    name: &'a str,
    has: &'a [&'a str],
    prefix: &'a str,
    clustered: bool,
    /// Whether it runs the sliding log.
    sliding_log: bool,
    /// Whether it keeps plans and overrides besides blocks.
    every_row: bool,
}

impl<'a> Subject<'a> {
    /// A store that fails as a whole (failure domain 0).
    fn new(name: &'a str, has: &'a [&'a str], prefix: &'a str) -> Self {
        let clustered = false;
        Self {
            name,
            has,
            prefix,
            clustered,
            sliding_log: true,
            every_row: true,
        }
    }
}

/// Runs every wrapping of `store` against `store` itself.
async fn every_wrapping<S: Store + Clone>(subject: Subject<'_>, store: S) {
    let has: Vec<&str> = presence(&store)
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
    assert_eq!(has, subject.has, "{}: its capabilities", subject.name);
    for (i, (shape, outer)) in wrappings(&store).into_iter().enumerate() {
        let case = shape.replace('_', subject.name);
        let key = format!("{}:caps:{i}", subject.prefix);
        same_as_inner(&case, &*outer, &store, shape, &subject, &key);
        let policy = policy(subject.sliding_log);
        reach(&case, &*outer, &key, &policy, subject.every_row).await;
    }
}

/// What `outer` (wrapped as `shape`) is and has, against `inner`.
fn same_as_inner(
    case: &str,
    outer: &dyn Capabilities,
    inner: &dyn Capabilities,
    shape: &str,
    subject: &Subject<'_>,
    key: &str,
) {
    for ((name, outside), (_, inside)) in presence(outer).into_iter().zip(presence(inner)) {
        let wrong = if inside { "missing" } else { "claims" };
        assert_eq!(outside, inside, "{case}: {wrong} {name}");
    }
    assert_eq!(outer.is_remote(), inner.is_remote(), "{case}: is_remote");
    let guarded = shape.contains("Guarded");
    let deadline = match inner.deadline() {
        Some(own) if guarded => Some(own.min(GUARD_DEADLINE)),
        None if guarded => Some(GUARD_DEADLINE),
        own => own,
    };
    assert_eq!(outer.deadline(), deadline, "{case}: deadline");
    assert_eq!(outer.is_guarded(), guarded, "{case}: is_guarded");
    let hot = shape.contains("HotKeys");
    assert_eq!(outer.honours_hot_keys(), hot, "{case}: honours_hot_keys");
    let mut domains = BTreeSet::new();
    for k in (0..SPREAD).map(|n| Key::from(format!("{key}:spread:{n}"))) {
        let (domain, outside) = (inner.failure_domain(&k), outer.failure_domain(&k));
        assert_eq!(outside, domain, "{case}: failure_domain({k})");
        domains.insert(domain);
    }
    for &domain in &domains {
        let name = inner.failure_domain_name(domain);
        let outside = outer.failure_domain_name(domain);
        assert_eq!(outside, name, "{case}: failure_domain_name({domain})");
    }
    if subject.clustered {
        assert!(domains.len() >= 2, "{case}: one failure domain {domains:?}");
    } else {
        assert_eq!(domains, BTreeSet::from([0]), "{case}: failure domains");
    }
}

/// `result`'s value, or a panic naming the case and the call.
fn ok<T>(case: &str, call: &str, result: Result<T, Error>) -> T {
    result.unwrap_or_else(|error| panic!("{case}: {call}: {error}"))
}

/// Calls each capability `store` answers through its trait object, each on
/// a key of its own, and checks the outcome; `every_row`: the store keeps
/// plans and overrides besides blocks (else it refuses them).
async fn reach(case: &str, store: &dyn Checked, key: &str, policy: &Policy, every_row: bool) {
    let policy = policy.clone();
    if let Some(state) = store.as_key_state() {
        let peeked = state
            .peek(&Key::from(format!("{key}:peek")), &policy, 1)
            .await;
        let peeked = ok(case, "peek", peeked);
        // What a check would answer: allowed, one request fewer left.
        let answer = (peeked.allowed(), peeked.remaining());
        assert_eq!(answer, (true, LIMIT - 1), "{case}: peek on a fresh key");
        resets(case, store, state, &format!("{key}:reset"), &policy).await;
        refunds_back(case, state, &format!("{key}:refund"), &policy).await;
    }
    if let Some(shared) = store.as_shared_control() {
        blocks_and_lifts(case, shared, &format!("{key}:block")).await;
        penalized(case, shared, &format!("{key}:penalty")).await;
        if every_row {
            plans_assigned(case, shared, &format!("{key}:plan")).await;
            overridden(case, shared, &format!("{key}:override")).await;
        } else {
            refused(case, shared, &format!("{key}:plan")).await;
        }
    }
    if let Some(permits) = store.as_permits() {
        permits_held(case, permits, &format!("{key}:permit")).await;
    }
}

/// A store that keeps only blocks refuses plans and overrides, naming
/// them.
async fn refused(case: &str, shared: &dyn SharedControl, key: &str) {
    let plan = shared.assign_plan(key, Some("pro")).await;
    let off = Override::off();
    let minute = Duration::from_secs(60);
    let overridden = shared.set_override(key, &off, minute).await;
    let answers = [plan, overridden].map(|answer| match answer {
        Err(Error::Unsupported(what)) => what,
        other => panic!("{case}: a plan or override on a store without: {other:?}"),
    });
    assert_eq!(answers, ["plan assignments", "overrides"], "{case}");
    assert!(shared.tables().plans().is_empty(), "{case}: plans");
    assert!(shared.tables().overrides().is_empty(), "{case}: overrides");
}

/// An override set holds at once, for its duration, and ends at once.
async fn overridden(case: &str, overrides: &dyn SharedControl, limit: &str) {
    let minute = Duration::from_secs(60);
    let started = std::time::Instant::now();
    ok(
        case,
        "set_override",
        overrides
            .set_override(limit, &Override::off(), minute)
            .await,
    );
    let held = overrides.override_of(limit);
    let least = minute - started.elapsed() - Duration::from_millis(1);
    let live = held.as_ref().is_some_and(|(value, left)| {
        **value == Override::off() && *left >= least && *left <= minute
    });
    assert!(
        live,
        "{case}: override_of({limit}) after set_override: {held:?}"
    );
    let cleared = overrides.change(Change::ClearOverride { limit }).await;
    ok(case, "clear_override", cleared);
    let held = overrides.override_of(limit);
    assert_eq!(
        held, None,
        "{case}: override_of({limit}) after clear_override"
    );
}

/// A key whose quota is used up finds it whole again once reset.
async fn resets(case: &str, store: &dyn Checked, reset: &dyn KeyState, key: &str, policy: &Policy) {
    for left in (0..LIMIT).rev() {
        let decision = ok(case, "check", store.check_one(key, policy).await);
        let answer = (decision.allowed(), decision.remaining());
        assert_eq!(answer, (true, left), "{case}: check before the reset");
    }
    let denied = ok(case, "check", store.check_one(key, policy).await);
    assert!(!denied.allowed(), "{case}: the check past the quota");
    ok(case, "reset", reset.reset(&Key::from(key), policy).await);
    let again = ok(case, "check", store.check_one(key, policy).await);
    let answer = (again.allowed(), again.remaining());
    assert_eq!(answer, (true, LIMIT - 1), "{case}: check after the reset");
}

/// A refunded request no longer counts.
async fn refunds_back(case: &str, refunds: &dyn KeyState, key: &str, policy: &Policy) {
    let peek = refunds;
    let checked = refunds.check_refundable(&Key::from(key), policy, 1).await;
    let (decision, receipt) = ok(case, "check_refundable", checked);
    assert!(decision.allowed(), "{case}: check_refundable");
    let receipt = receipt.unwrap_or_else(|| panic!("{case}: no receipt"));
    let remaining =
        async || ok(case, "peek", peek.peek(&Key::from(key), policy, 1).await).remaining();
    assert_eq!(remaining().await, LIMIT - 2, "{case}: before the refund");
    ok(
        case,
        "refund",
        refunds.refund(&Key::from(key), policy, &receipt).await,
    );
    assert_eq!(remaining().await, LIMIT - 1, "{case}: after the refund");
}

/// A block is seen at once, and so is its end.
async fn blocks_and_lifts(case: &str, blocks: &dyn SharedControl, key: &str) {
    let minute = Duration::from_secs(60);
    let started = std::time::Instant::now();
    let blocked = blocks.operator_block(key, minute).await;
    ok(case, "block", blocked);
    let left = blocks.blocked(key);
    // The minute less what has passed since the call (less the store's
    // millisecond, which may round the end down).
    let least = minute - started.elapsed() - Duration::from_millis(1);
    let recent = left.is_some_and(|left| left >= least && left <= minute);
    assert!(recent, "{case}: blocked({key}) after a block: {left:?}");
    ok(case, "unblock", blocks.unblock(key).await);
    let left = blocks.blocked(key);
    assert_eq!(left, None, "{case}: blocked({key}) after unblock");
}

/// A penalty of one denial earns its block at the first.
async fn penalized(case: &str, penalties: &dyn SharedControl, key: &str) {
    let block = Duration::from_secs(30);
    let penalty = Penalty::new(1, Duration::from_secs(60), [block]).unwrap();
    let earned = ok(
        case,
        "penalize",
        penalties.penalize(key, &penalty, key).await,
    );
    assert_eq!(earned, Some(block), "{case}: penalize({key})");
}

/// A plan assigned is the key's at once.
async fn plans_assigned(case: &str, plans: &dyn SharedControl, key: &str) {
    let assigned = plans.assign_plan(key, Some("pro")).await;
    ok(case, "assign_plan", assigned);
    let plan = plans.assigned_plan(key);
    assert_eq!(plan.as_deref(), Some("pro"), "{case}: assigned_plan({key})");
}

/// One permit of a limit of one is taken; a second is not while it is held.
async fn permits_held(case: &str, permits: &dyn Permits, key: &str) {
    let limit = ConcurrencyLimit::new(1).unwrap();
    let acquire = async || ok(case, "acquire", permits.acquire_permit(key, &limit).await);
    let first = acquire().await;
    assert!(first.allowed(), "{case}: the first permit");
    let second = acquire().await;
    assert!(
        !second.allowed(),
        "{case}: a second permit while one is held"
    );
}

/// Everything but leases: the memory store is one process's.
const MEMORY: &[&str] = &["KeyState", "Permits", "SharedControl"];

/// Every capability is kept in Redis.
const REDIS: &[&str] = &["KeyState", "Permits", "Leases", "SharedControl"];

/// Peeks, resets and refunds; blocks and penalties, kept in every region
/// (no plans nor overrides).
const REGIONAL: &[&str] = &["KeyState", "SharedControl"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store() {
    let subject = Subject::new("memory", MEMORY, "memory");
    every_wrapping(subject, MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_standalone() {
    let redis = limiter_tests::redis();
    let subject = Subject::new("redis standalone", REDIS, redis.prefix());
    every_wrapping(subject, redis.store().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster() {
    let cluster = RedisCluster::start();
    let store = cluster.store().await;
    slots_known(&store);
    let mut subject = Subject::new("redis cluster", REDIS, "cluster");
    subject.clustered = true;
    every_wrapping(subject, store).await;
}

/// A store that `connect_cluster` answered knows which node serves which
/// slot before its first call: a guard keeps a breaker per node from the
/// start (every key is domain 0 while the table is unknown).
fn slots_known(store: &RedisStore) {
    let domains: std::collections::BTreeSet<u64> = (0..32)
        .map(|i| store.failure_domain(&Key::from(format!("cluster:connect:{i}"))))
        .collect();
    assert!(!domains.contains(&0), "a key without its node: {domains:?}");
    assert_eq!(
        domains.len(),
        3,
        "the test cluster's 3 masters: {domains:?}"
    );
}

/// One region, as the conformance suite builds it: its lease is the whole
/// quota, so each capability's answer is exact. (Across regions:
/// limiter-regional's `leases.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regional_store() {
    let server = RedisServer::start();
    let config = RegionalConfig::new()
        .local_deadline(Duration::from_secs(5))
        .peer_deadline(Duration::from_secs(1))
        .connection_timeout(Duration::from_secs(2));
    let north = Region::open("north", &server.url()).unwrap();
    let store = RegionalStore::with_config(north, [], config).unwrap();
    let subject = Subject {
        sliding_log: false,
        every_row: false,
        ..Subject::new("regional", REGIONAL, "regional")
    };
    every_wrapping(subject, store).await;
}
