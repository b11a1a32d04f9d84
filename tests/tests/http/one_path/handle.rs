//! One handle: a program with a layer calls the layer's `Control` for
//! everything a `Limiter` answers, with the same answers. Each handle runs
//! one script on a store and a manual clock of its own, from the same
//! time, and every answer is compared step by step.

use std::time::Duration;

use limiter_tower::{
    Acquired, ConcurrencyLimit, Control, Decision, Identity, Limiter, LimiterLayer, ManualClock,
    MemoryStore, Policy, Rule,
};

const T0: Duration = Duration::from_secs(1_750_000_000);

/// Runs the script on `$handle` (a `Limiter` or a `Control`, which share
/// no trait), answering every result in order, as text.
macro_rules! script {
    ($handle:expr, $clock:expr) => {{
        let (h, clock): (_, &ManualClock) = (&$handle, &$clock);
        let policy = Policy::sliding_log([Rule::new(2, Duration::from_secs(60)).unwrap()]).unwrap();
        let key = |name: &str| name.to_owned();
        let mut answers: Vec<String> = Vec::new();
        let mut note = |answer: String| answers.push(answer);
        // check: 2 pass, the third is denied; a peek counts nothing.
        for _ in 0..3 {
            note(show(h.check(&key("check"), &policy).await));
        }
        note(show(h.peek(&key("check"), &policy).await));
        note(show(h.peek(&key("check"), &policy).await));
        // A cost of 2 fills the key; then 1 more is denied.
        note(show(h.check_with_cost(&key("cost"), &policy, 2).await));
        note(show(h.check_with_cost(&key("cost"), &policy, 1).await));
        // One export a minute.
        let user = key("ada");
        let minute = Duration::from_secs(60);
        for _ in 0..2 {
            note(format!(
                "{:?}",
                h.is_action_allowed(&user, "export", minute, 1).await
            ));
        }
        // acquire: beyond the bound, denied at once.
        for _ in 0..3 {
            note(show(
                h.acquire(&key("acquire"), &policy, Duration::ZERO).await,
            ));
        }
        // attempt: recorded, then given back.
        let attempt = h.attempt(&key("attempt"), &policy).await.unwrap();
        note(format!(
            "{:?} {}",
            attempt.decision(),
            attempt.receipt().is_some()
        ));
        attempt.refund().await.unwrap();
        note(show(h.peek(&key("attempt"), &policy).await));
        // A permit of 1 concurrent: the second is denied until the first
        // is dropped.
        let exports = ConcurrencyLimit::new(1).unwrap();
        let first = h.acquire_permit(&key("permit"), &exports).await.unwrap();
        let second = h.acquire_permit(&key("permit"), &exports).await.unwrap();
        note(format!("{} {}", first.allowed(), permit(&second)));
        drop(first);
        note(permit(
            &h.acquire_permit(&key("permit"), &exports).await.unwrap(),
        ));
        // Blocked: the user's every action is denied until unblocked.
        let mallory = Identity::user(key("mallory"));
        h.block(&mallory, Duration::from_secs(900)).await.unwrap();
        clock.advance(Duration::from_secs(100));
        note(format!("{:?}", h.blocked(&mallory)));
        let mallorys = key("mallory");
        note(format!(
            "{:?}",
            h.is_action_allowed(&mallorys, "post", minute, 5).await
        ));
        h.unblock(&mallory).await.unwrap();
        note(format!("{:?}", h.blocked(&mallory)));
        note(format!(
            "{:?}",
            h.is_action_allowed(&mallorys, "post", minute, 5).await
        ));
        clock.advance(Duration::from_secs(1));
        note(show(h.check(&key("check"), &policy).await));
        answers
    }};
}

fn show(decision: Result<Decision, limiter_tower::Error>) -> String {
    let decision = decision.unwrap();
    format!("allowed {}: {decision:?}", decision.allowed())
}

fn permit(acquired: &Acquired) -> String {
    match acquired {
        Acquired::Permit(_) => "permit".to_owned(),
        Acquired::Denied(decision) => format!("denied {decision:?}"),
    }
}

/// A `Limiter` and its layer's `Control`, over one memory store on one
/// manual clock.
fn handles() -> (Limiter<MemoryStore<ManualClock>>, Control, ManualClock) {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::with_clock(clock.clone()));
    let control = LimiterLayer::new(limiter.clone()).control();
    (limiter, control, clock)
}

#[tokio::test]
async fn the_layers_control_answers_every_limiter_call_alike() {
    let (limiter, _, clock) = handles();
    let by_limiter = script!(limiter, clock);
    let (_, control, clock) = handles();
    let by_control = script!(control, clock);
    assert_eq!((by_limiter.len(), by_control.len()), (21, 21));
    for (step, (l, c)) in by_limiter.iter().zip(&by_control).enumerate() {
        assert_eq!(l, c, "step {step}");
    }
    // The answers are the script's: spot-check the outcomes.
    let allowed = |step: usize| by_limiter[step].split(':').next().unwrap().to_owned();
    let checks = [0, 1, 2, 5, 6, 9, 10, 11, 20].map(allowed);
    let expected = [true, true, false, true, false, true, true, false, true];
    assert_eq!(checks, expected.map(|a| format!("allowed {a}")));
    assert_eq!(by_limiter[7..9], ["Ok(true)", "Ok(false)"]);
    assert_eq!(
        by_limiter[16..20],
        ["Some(800s)", "Ok(false)", "None", "Ok(true)"]
    );
}

/// Keys are written alike, and `reset` on `Control` forgets an identity's
/// limits where `reset_key` is `Limiter::reset`.
#[tokio::test]
async fn keys_are_written_alike_and_reset_key_forgets_a_key() {
    let (limiter, control, _clock) = handles();
    assert_eq!(limiter.prefix(), control.prefix());
    for identity in [Identity::user("ada"), Identity::ip([203, 0, 113, 7].into())] {
        assert_eq!(
            limiter.identity_key(&identity),
            control.identity_key(&identity)
        );
    }
    // An IPv6 address: the layer's requests count its /64, which a
    // `Limiter` names as the network.
    let v6 = "2001:db8:1:2::7".parse().unwrap();
    let network = limiter.identity_key(&Identity::network(v6, 64));
    assert_eq!(control.identity_key(&Identity::ip(v6)), network);
    assert_ne!(limiter.identity_key(&Identity::ip(v6)), network);

    let policy = Policy::sliding_log([Rule::new(1, Duration::from_secs(60)).unwrap()]).unwrap();
    assert!(limiter.check("k", &policy).await.unwrap().allowed());
    assert!(!control.check("k", &policy).await.unwrap().allowed());
    control.reset_key("k", &policy).await.unwrap();
    assert!(limiter.check("k", &policy).await.unwrap().allowed());
    limiter.reset("k", &policy).await.unwrap();
    assert!(control.check("k", &policy).await.unwrap().allowed());
}
