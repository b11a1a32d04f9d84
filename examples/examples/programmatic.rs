//! The programmatic API, for limits that are not an HTTP route: "may user
//! `laoqian` reply again? At most 5 replies a minute", then the full
//! `Decision` of a check.
//!
//! Run with `cargo run -p limiter-examples --example programmatic`.
//!
//! Uses the in-memory store (no Redis needed); nothing waits, so the example
//! ends at once. Every outcome is asserted: the example panics if the
//! behaviour changes.

use std::time::Duration;

use limiter_tower::{Decision, Limiter, MemoryStore, Policy, Rule};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = Limiter::new(MemoryStore::new());
    // Or shared by every instance of the service, through Redis:
    // let limiter = Limiter::new(RedisStore::connect("redis://127.0.0.1:6379/").await?);

    println!("is_action_allowed(\"laoqian\", \"reply\", 60 s, 5), 7 times:");
    for attempt in 1..=7 {
        let allowed = limiter
            .is_action_allowed("laoqian", "reply", Duration::from_secs(60), 5)
            .await?;
        println!(
            "  reply {attempt}: {}",
            if allowed { "allowed" } else { "refused" }
        );
        assert_eq!(allowed, attempt <= 5);
    }
    // Keys are per user: `rate_limit:xiaoming:reply` is untouched.
    assert!(
        limiter
            .is_action_allowed("xiaoming", "reply", Duration::from_secs(60), 5)
            .await?
    );

    println!("check(\"203.0.113.7:posts\", 3 per 60 s and 5 per 120 s), 4 times:");
    let policy = Policy::sliding_log([
        Rule::new(3, Duration::from_secs(60))?,
        Rule::new(5, Duration::from_secs(120))?,
    ])?;
    for attempt in 1..=4 {
        let decision = limiter.check("203.0.113.7:posts", &policy).await?;
        print_decision(attempt, &decision, &policy);
        assert_eq!(decision.allowed(), attempt <= 3);
        assert_eq!(decision.rule().to_string(), "3-per-60s");
        assert_eq!(decision.limit(), 3);
        assert_eq!(decision.remaining(), 3 - attempt.min(3));
        assert_eq!(decision.delay(), Duration::ZERO);
        assert!(decision.reset_after() <= Duration::from_secs(120));
    }
    let denied = limiter.check("203.0.113.7:posts", &policy).await?;
    let retry_after = denied
        .retry_after()
        .expect("a denied decision says when to retry");
    assert!(retry_after > Duration::from_secs(59) && retry_after <= Duration::from_secs(60));
    assert_eq!(denied.rules()[1].remaining(), 2);

    println!("ok");
    Ok(())
}

/// Prints every field of a decision.
fn print_decision(attempt: u64, d: &Decision, policy: &Policy) {
    println!(
        "  check {attempt}: allowed={} limit={} remaining={} retry_after={:?} reset_after={:.3?} delay={:?} rule={}",
        d.allowed(),
        d.limit(),
        d.remaining(),
        d.retry_after(),
        d.reset_after(),
        d.delay(),
        d.rule(),
    );
    for (rule, status) in policy.rules().iter().zip(d.rules()) {
        println!(
            "    rule {}: remaining={} available_after={:.3?}",
            rule,
            status.remaining(),
            status.available_after()
        );
    }
}
