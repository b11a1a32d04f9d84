//! The pipeline on its own, as a check made without a request takes it:
//! every step's exact answer on the memory store.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::{Change, GuardConfig, ManualClock, MemoryStore, Override, Penalty, Rule, Waiters};

/// The pipeline's shared parts over a memory store on a clock that stands
/// still.
fn shared() -> Shared {
    let store = MemoryStore::with_clock(ManualClock::new(Duration::from_secs(1_000_000)));
    let store = store_builder(store)(GuardConfig::default());
    Shared {
        tables: tables_of(&*store),
        store,
        on_store_error: None,
        key_start: "rl:".into(),
        waiters: Waiters::new(),
        offenders: Arc::new(Offenders::new("test".into(), Duration::ZERO)),
    }
}

fn per_minute(limit: u64) -> Policy {
    Policy::sliding_log([Rule::new(limit, Duration::from_secs(60)).unwrap()]).unwrap()
}

/// A check of `user` by `limit` under `shared`.
async fn check(limit: &NamedLimit, shared: &Shared, user: &str) -> Checked {
    check_with(limit, shared, user, None, None).await
}

async fn check_with(
    limit: &NamedLimit,
    shared: &Shared,
    user: &str,
    listed: Option<Listed>,
    penalty: Option<Arc<Penalty>>,
) -> Checked {
    let identity = Identity::user(user);
    let key = Key::of_identity(&shared.key_start, |k| identity.push_key(k), &limit.name);
    let check = Check {
        block_key: shared.block_key(&key),
        key,
        identity: &identity,
        listed,
        shadow: false,
        penalty,
        refundable: false,
    };
    limit.check(shared, check).await.unwrap()
}

async fn change(shared: &Shared, change: Change<'_>) {
    let control = shared.store.capabilities().as_shared_control().unwrap();
    control.change(change).await.unwrap();
}

/// `value` in force on the limit `login` for a minute.
async fn override_login(shared: &Shared, value: &Override) {
    let set = Change::SetOverride {
        limit: "login",
        value,
        duration: Duration::from_secs(60),
    };
    change(shared, set).await;
}

fn remaining(checked: &Checked) -> Option<u64> {
    checked
        .decision
        .allowed()
        .then(|| checked.decision.remaining())
}

#[tokio::test]
async fn a_check_takes_the_override_then_the_compiled_rules_and_counts_its_denials() {
    let shared = shared();
    let limit = NamedLimit::new("login", per_minute(3));
    assert_eq!(remaining(&check(&limit, &shared, "ada").await), Some(2));

    let tighter = Override::rules(per_minute(2));
    override_login(&shared, &tighter).await;
    let overridden = check(&limit, &shared, "ada").await;
    assert_eq!(remaining(&overridden), Some(0));
    assert_eq!(overridden.policy.rules()[0].limit(), 2);
    let denied = check(&limit, &shared, "ada").await;
    assert_eq!(remaining(&denied), None);
    assert_eq!(shared.offenders.report("login").counted, 1);

    let off = Override::off();
    override_login(&shared, &off).await;
    let unchecked = check(&limit, &shared, "ada").await;
    assert!(unchecked.decision.allowed());
    assert_eq!(unchecked.policy.rules()[0].limit(), 3);

    change(&shared, Change::ClearOverride { limit: "login" }).await;
    // The compiled 3 again: the first check and the override's allowed
    // one counted, the denial and the unchecked one did not.
    assert_eq!(remaining(&check(&limit, &shared, "ada").await), Some(0));
    assert_eq!(remaining(&check(&limit, &shared, "ada").await), None);
    assert_eq!(shared.offenders.report("login").counted, 2);
}

#[tokio::test]
async fn lists_and_blocks_answer_before_the_store_and_a_penalty_earns_a_block() {
    let shared = shared();
    let limit = NamedLimit::new("replies", per_minute(1));
    let denied = check_with(&limit, &shared, "eve", Some(Listed::Denied), None).await;
    assert!(denied.deny_listed && !denied.decision.allowed());
    for _ in 0..3 {
        let allowed = check_with(&limit, &shared, "eve", Some(Listed::Allowed), None).await;
        assert!(allowed.decision.allowed() && allowed.blocked.is_none());
    }
    // The allowed ones counted nothing.
    assert_eq!(remaining(&check(&limit, &shared, "eve").await), Some(0));

    let penalty =
        Arc::new(Penalty::new(2, Duration::from_secs(60), [Duration::from_secs(600)]).unwrap());
    for _ in 0..2 {
        let denied = check_with(&limit, &shared, "eve", None, Some(Arc::clone(&penalty))).await;
        assert!(!denied.decision.allowed() && denied.blocked.is_none());
    }
    let blocked = check(&limit, &shared, "eve").await;
    assert_eq!(blocked.blocked, Some(Duration::from_secs(600)));
    assert_eq!(
        shared.blocked("rl:user=eve"),
        Some(Duration::from_secs(600))
    );
    // A limit that does not honour blocks checks the store still.
    let unblocked = NamedLimit {
        honours_blocks: false,
        ..NamedLimit::new("replies", per_minute(1))
    };
    let checked = check(&unblocked, &shared, "eve").await;
    assert!(checked.blocked.is_none() && !checked.decision.allowed());
}
