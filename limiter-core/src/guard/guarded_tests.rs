//! The guard: deadlines, breakers, the deny cache and the failure policy.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::{ManualClock, Rule};

/// A store that is down: every call fails, and is counted.
#[derive(Debug, Default)]
struct Down {
    calls: AtomicUsize,
}

impl crate::Capabilities for Down {}

impl Store for Down {
    async fn check(&self, _: &Key, _: &Policy, _: u64) -> Result<Decision, Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(Error::Protocol("down".into()))
    }
}

/// The key every test checks.
fn k() -> Key {
    Key::from("k")
}

fn policy() -> Policy {
    Policy::sliding_log([Rule::new(4, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// A policy that names its failure policy is decided by it through
/// `Store::check`, whatever the guard's own; the decision says who made
/// it, and `Verdict::of` reads it back as `check_with` answers.
#[tokio::test]
async fn a_policy_names_its_own_failure_policy_to_a_shared_guard() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let config = GuardConfig {
        on_store_error: OnStoreError::FailClosed,
        ..GuardConfig::default()
    };
    let guarded = Guarded::with_clock(Down::default(), config, clock);
    let closed = guarded.check(&k(), &policy(), 1).await;
    assert!(matches!(closed, Err(Error::Unavailable(d)) if d == Duration::from_secs(1)));
    let open = policy().with_on_store_error(OnStoreError::FailOpen);
    let decision = guarded.check(&k(), &open, 1).await.unwrap();
    assert_eq!(decision.decider(), crate::Decider::FailedOpen);
    assert_eq!((decision.allowed(), decision.remaining()), (true, 4));
    assert_eq!(Verdict::of(Ok(decision)).unwrap(), Verdict::FailedOpen);
    let fallback = policy().with_on_store_error(OnStoreError::Fallback { instances: 2 });
    let deciders: Vec<_> = three_checks(&guarded, &fallback).await;
    assert_eq!(
        deciders,
        [
            (true, crate::Decider::Fallback),
            (true, crate::Decider::Fallback),
            (false, crate::Decider::Fallback)
        ]
    );
    assert_eq!(
        Verdict::of(guarded.check(&k(), &policy(), 1).await).unwrap(),
        Verdict::FailedClosed {
            retry_after: Duration::from_secs(1)
        }
    );
}

/// Three checks of `policy` on one key: whether each was allowed, and who
/// decided it.
async fn three_checks(
    guarded: &Guarded<Down, ManualClock>,
    policy: &Policy,
) -> Vec<(bool, crate::Decider)> {
    let mut answers = Vec::new();
    for _ in 0..3 {
        let decision = guarded.check(&k(), policy, 1).await.unwrap();
        answers.push((decision.allowed(), decision.decider()));
    }
    answers
}

#[tokio::test]
async fn each_policy_decides_while_the_store_is_down() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let guarded = Guarded::with_clock(Down::default(), GuardConfig::default(), clock.clone());
    // Fallback, limits halved for 2 instances: 2 of 4 pass here.
    let fallback = OnStoreError::Fallback { instances: 2 };
    let mut allowed = Vec::new();
    for _ in 0..3 {
        let verdict = guarded
            .check_with(&k(), &policy(), 1, fallback)
            .await
            .unwrap();
        assert!(matches!(verdict, Verdict::Fallback(_)));
        allowed.push(verdict.allowed());
    }
    assert_eq!(allowed, [true, true, false]);
    let open = guarded
        .check_with(&k(), &policy(), 1, OnStoreError::FailOpen)
        .await
        .unwrap();
    assert_eq!(open, Verdict::FailedOpen);
    let closed = guarded
        .check_with(&k(), &policy(), 1, OnStoreError::FailClosed)
        .await
        .unwrap();
    assert_eq!(
        closed,
        Verdict::FailedClosed {
            retry_after: Duration::from_secs(1)
        }
    );
    // Three failures opened the breaker: the later calls skipped the store.
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 3);
    assert_eq!(guarded.breaker_state(), BreakerState::Open);
    clock.advance(Duration::from_secs(1));
    guarded
        .check_with(&k(), &policy(), 1, fallback)
        .await
        .unwrap();
    assert_eq!(
        guarded.store().calls.load(Ordering::SeqCst),
        4,
        "one probe per interval"
    );
}

#[tokio::test]
async fn a_probe_with_an_invalid_cost_leaves_the_breaker_probing_again() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let guarded = Guarded::with_clock(Down::default(), GuardConfig::default(), clock.clone());
    for _ in 0..3 {
        guarded
            .check_with(&k(), &policy(), 1, OnStoreError::FailOpen)
            .await
            .unwrap();
    }
    assert_eq!(guarded.breaker_state(), BreakerState::Open);
    clock.advance(Duration::from_secs(1));
    // Refused before the breaker admits it: not the probe.
    let refused = guarded
        .check_with(&k(), &policy(), 5, OnStoreError::FailOpen)
        .await;
    assert!(matches!(refused, Err(Error::Config(_))));
    guarded
        .check_with(&k(), &policy(), 1, OnStoreError::FailOpen)
        .await
        .unwrap();
    assert_eq!(
        guarded.store().calls.load(Ordering::SeqCst),
        4,
        "the next call probes"
    );
}

/// A store that fails, hangs or answers, as the test says.
#[derive(Debug, Default)]
struct Switch {
    /// 0 fails, 1 hangs, 2 answers (allowing everything).
    mode: std::sync::atomic::AtomicU8,
    calls: AtomicUsize,
}

impl crate::Capabilities for Switch {}

impl Store for Switch {
    async fn check(&self, _: &Key, policy: &Policy, _: u64) -> Result<Decision, Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode.load(Ordering::SeqCst) {
            0 => Err(Error::Protocol("down".into())),
            1 => std::future::pending().await,
            _ => Ok(Decision::unchecked(policy)),
        }
    }
}

#[tokio::test]
async fn a_cancelled_probe_does_not_keep_the_breaker_open() {
    use futures_util::FutureExt;

    let clock = ManualClock::new(Duration::from_secs(1_000));
    let guarded = Guarded::with_clock(Switch::default(), GuardConfig::default(), clock.clone());
    let fail_open = OnStoreError::FailOpen;
    for _ in 0..3 {
        guarded
            .check_with(&k(), &policy(), 1, fail_open)
            .await
            .unwrap();
    }
    assert_eq!(guarded.breaker_state(), BreakerState::Open);
    clock.advance(Duration::from_secs(1));
    // The probe reaches a hung store; its request is cancelled there.
    guarded.store().mode.store(1, Ordering::SeqCst);
    let hung = policy();
    let key = k();
    let probe = guarded.check_with(&key, &hung, 1, fail_open);
    assert!(
        probe.now_or_never().is_none(),
        "the probe waits on the store"
    );
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 4);
    assert_eq!(guarded.breaker_state(), BreakerState::Open);
    // The store is back: the very next call probes it and closes the breaker.
    guarded.store().mode.store(2, Ordering::SeqCst);
    let verdict = guarded
        .check_with(&k(), &policy(), 1, fail_open)
        .await
        .unwrap();
    assert!(matches!(verdict, Verdict::Store(_)));
    assert_eq!(guarded.breaker_state(), BreakerState::Closed);
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_denial_is_answered_locally_until_it_ends() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let memory = MemoryStore::with_clock(clock.clone());
    let counted = Counted {
        inner: memory,
        calls: AtomicUsize::new(0),
    };
    let guarded = Guarded::with_clock(counted, GuardConfig::default(), clock.clone());
    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(10)).unwrap()]).unwrap();
    assert!(guarded.check(&k(), &policy, 1).await.unwrap().allowed());
    for _ in 0..100 {
        let denied = guarded.check(&k(), &policy, 1).await.unwrap();
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
    }
    assert_eq!(
        guarded.store().calls.load(Ordering::SeqCst),
        2,
        "one denial from the store"
    );
    clock.advance(Duration::from_secs(10));
    assert!(guarded.check(&k(), &policy, 1).await.unwrap().allowed());
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_cached_denial_serves_only_a_policy_with_the_rule_that_denied() {
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let memory = MemoryStore::with_clock(clock.clone());
    let counted = Counted {
        inner: memory,
        calls: AtomicUsize::new(0),
    };
    let guarded = Guarded::with_clock(counted, GuardConfig::default(), clock.clone());
    let per_minute =
        |n| Policy::sliding_log([Rule::new(n, Duration::from_secs(60)).unwrap()]).unwrap();
    let (free, pro) = (per_minute(1), per_minute(5));
    assert!(guarded.check(&k(), &free, 1).await.unwrap().allowed());
    assert!(!guarded.check(&k(), &free, 1).await.unwrap().allowed());
    assert!(!guarded.check(&k(), &free, 1).await.unwrap().allowed());
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 2);
    // The key's plan is raised: its cached denial by 1-per-60s does not hold.
    assert!(guarded.check(&k(), &pro, 1).await.unwrap().allowed());
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 3);
}

#[derive(Debug)]
struct Counted {
    inner: MemoryStore<ManualClock>,
    calls: AtomicUsize,
}

impl crate::Capabilities for Counted {}

impl Store for Counted {
    async fn check(&self, key: &Key, policy: &Policy, cost: u64) -> Result<Decision, Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.check(key, policy, cost).await
    }
}

/// A store that takes 80 ms and says it bounds its calls by `own`.
struct Slow {
    own: Duration,
}

impl Store for Slow {
    async fn check(&self, _: &Key, policy: &Policy, _: u64) -> Result<Decision, Error> {
        tokio::time::sleep(Duration::from_millis(80)).await;
        Ok(Decision::unchecked(policy))
    }
}

impl crate::Capabilities for Slow {
    fn deadline(&self) -> Option<Duration> {
        Some(self.own)
    }
}

/// Each call has one deadline: a store that bounds its calls within the
/// guard's deadline keeps its own timer, and the guard adds none (this
/// store, taking longer than it says, shows it); a store whose bound is
/// longer gets the guard's.
#[tokio::test]
async fn a_store_bounding_its_calls_within_the_deadline_keeps_the_one_timer() {
    let policy = Policy::sliding_log([Rule::new(5, Duration::from_secs(60)).unwrap()]).unwrap();
    let within = Guarded::new(
        Slow {
            own: Duration::from_millis(40),
        },
        GuardConfig::default(),
    );
    let verdict = within
        .check_with(&k(), &policy, 1, OnStoreError::FailClosed)
        .await
        .unwrap();
    assert!(matches!(verdict, Verdict::Store(_)), "{verdict:?}");
    let beyond = Guarded::new(
        Slow {
            own: Duration::from_millis(200),
        },
        GuardConfig::default(),
    );
    let verdict = beyond
        .check_with(&k(), &policy, 1, OnStoreError::FailClosed)
        .await
        .unwrap();
    assert!(
        matches!(verdict, Verdict::FailedClosed { .. }),
        "{verdict:?}"
    );
}

/// A store whose admin changes hang past the guard's deadline: sent, and
/// maybe made later.
struct Hung(crate::ControlTables);

impl Default for Hung {
    fn default() -> Self {
        Self(crate::ControlTables::new(1, || 0))
    }
}

impl crate::Capabilities for Hung {
    fn as_key_state(&self) -> Option<&dyn crate::KeyState> {
        Some(self)
    }

    fn as_shared_control(&self) -> Option<&dyn crate::SharedControl> {
        Some(self)
    }
}

impl Store for Hung {
    async fn check(&self, _: &Key, policy: &Policy, _: u64) -> Result<Decision, Error> {
        Ok(Decision::unchecked(policy))
    }
}

#[crate::async_trait]
impl crate::SharedControl for Hung {
    async fn change(&self, _: crate::Change<'_>) -> Result<(), Error> {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    }

    fn tables(&self) -> &crate::ControlTables {
        &self.0
    }

    async fn penalize(
        &self,
        _: &str,
        _: &crate::Penalty,
        _: &str,
    ) -> Result<Option<Duration>, Error> {
        Err(Error::Unsupported("penalties"))
    }
}

#[crate::async_trait]
impl crate::KeyState for Hung {
    async fn peek(&self, _: &Key, _: &Policy, _: u64) -> Result<Decision, Error> {
        Err(Error::Unsupported("peek"))
    }

    async fn reset(&self, _: &Key, _: &Policy) -> Result<(), Error> {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    }

    async fn check_refundable(
        &self,
        _: &Key,
        _: &Policy,
        _: u64,
    ) -> Result<(Decision, Option<crate::Receipt>), Error> {
        Err(Error::Unsupported("refunds"))
    }

    async fn refund(&self, _: &Key, _: &Policy, _: &crate::Receipt) -> Result<(), Error> {
        Err(Error::Unsupported("refunds"))
    }
}

/// A store whose operator blocks are full: every block is refused.
#[derive(Debug)]
struct FullBlocks {
    calls: AtomicUsize,
    tables: crate::ControlTables,
}

impl Default for FullBlocks {
    fn default() -> Self {
        Self {
            calls: AtomicUsize::new(0),
            tables: crate::ControlTables::new(1, || 0),
        }
    }
}

impl crate::Capabilities for FullBlocks {
    fn is_remote(&self) -> bool {
        false
    }

    fn as_shared_control(&self) -> Option<&dyn crate::SharedControl> {
        Some(self)
    }
}

impl Store for FullBlocks {
    async fn check(&self, _: &Key, _: &Policy, _: u64) -> Result<Decision, Error> {
        Err(Error::Unsupported("checks"))
    }
}

#[crate::async_trait]
impl crate::SharedControl for FullBlocks {
    async fn change(&self, _: crate::Change<'_>) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(Error::Full("full".into()))
    }

    fn tables(&self) -> &crate::ControlTables {
        &self.tables
    }

    async fn penalize(
        &self,
        _: &str,
        _: &crate::Penalty,
        _: &str,
    ) -> Result<Option<Duration>, Error> {
        Err(Error::Unsupported("penalties"))
    }
}

/// An admin change the guard's deadline cut short answers
/// `Error::Unconfirmed` (its outcome is unknown), the timeout inside.
#[tokio::test]
async fn an_admin_change_cut_short_by_the_deadline_is_unconfirmed() {
    use crate::{Change, KeyState, SharedControl};
    let guarded = Guarded::new(Hung::default(), GuardConfig::default());
    let deadline = guarded.config().deadline;
    let block = Change::Block {
        key: "k",
        duration: Duration::from_secs(60),
        origin: crate::BlockOrigin::Operator,
    };
    let answers = [
        guarded.change(block).await,
        guarded.change(Change::Unblock { key: "k" }).await,
        guarded.reset(&k(), &policy()).await,
    ];
    for answer in answers {
        assert!(
            matches!(&answer, Err(Error::Unconfirmed(cause)) if matches!(**cause, Error::Timeout(d) if d == deadline)),
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn a_block_refused_for_a_full_list_is_not_a_store_failure() {
    use crate::{Change, SharedControl};
    let clock = ManualClock::new(Duration::from_secs(1_000));
    let guarded = Guarded::with_clock(FullBlocks::default(), GuardConfig::default(), clock);
    for _ in 0..10 {
        let block = Change::Block {
            key: "k",
            duration: Duration::from_secs(60),
            origin: crate::BlockOrigin::Operator,
        };
        let refused = guarded.change(block).await;
        assert!(matches!(refused, Err(Error::Full(_))), "{refused:?}");
    }
    // Every refusal reached the store: the breaker stayed closed.
    assert_eq!(guarded.store().calls.load(Ordering::SeqCst), 10);
    assert_eq!(guarded.breaker_state(), BreakerState::Closed);
}

/// A guard of a store that keeps no shared control state reads empty
/// tables, and refuses a change naming what it lacks.
#[tokio::test]
async fn a_guard_of_a_store_without_shared_control_reads_nothing() {
    use crate::{Capabilities, Change, SharedControl};
    let guarded = Guarded::new(Down::default(), GuardConfig::default());
    assert!(guarded.as_shared_control().is_none());
    assert_eq!(SharedControl::tables(&guarded).blocked("k"), None);
    let unblock = guarded.change(Change::Unblock { key: "k" }).await;
    assert!(
        matches!(unblock, Err(Error::Unsupported("shared control"))),
        "{unblock:?}"
    );
}
