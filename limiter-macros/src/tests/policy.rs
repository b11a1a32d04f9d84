//! The policy is limiter-model's: built with its constructors, refused with
//! its messages.

use std::time::Duration;

use limiter_model::{ConfigError, DEFAULT_DUPLICATE_WINDOW, Policy, Rate, Rule};

use crate::check::policy;
use crate::expand;
use crate::parse::Args;

fn args(attr: &str) -> Args {
    syn::parse_str(attr).unwrap_or_else(|err| panic!("`{attr}` does not parse: {err}"))
}

fn built(attr: &str) -> Policy {
    match policy(&args(attr)) {
        Ok(built) => built.value,
        Err(err) => panic!("`{attr}` was refused: {err}"),
    }
}

fn error(attr: &str) -> String {
    match policy(&args(attr)) {
        Ok(_) => panic!("`{attr}` was accepted"),
        Err(err) => err.to_string(),
    }
}

/// The code that builds `args`' policy at run time.
fn run_time(args: &Args) -> String {
    expand::policy(&policy(args).unwrap()).to_string()
}

fn secs(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

fn rule(limit: u64, window: Duration) -> Rule {
    Rule::new(limit, window).unwrap()
}

/// limiter-model's message for `result`'s error.
fn core<T: std::fmt::Debug>(result: Result<T, ConfigError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn rules_make_a_sliding_log() {
    assert_eq!(
        built("rules = [(10, 60s), (20, 120s)]"),
        Policy::sliding_log([rule(10, secs(60)), rule(20, secs(120))]).unwrap()
    );
    assert_eq!(
        built("rules = [(1, 250ms,), (2, 3m), (4, 5h), (6, 366d),], algorithm = sliding_log,"),
        Policy::sliding_log([
            rule(1, Duration::from_millis(250)),
            rule(2, secs(180)),
            rule(4, secs(5 * 3600)),
            rule(6, limiter_model::MAX_WINDOW),
        ])
        .unwrap()
    );
}

#[test]
fn prevent_duplicate_and_cost_follow_the_algorithm() {
    let log = || Policy::sliding_log([rule(10, secs(60))]).unwrap();
    assert_eq!(
        built("rules = [(10, 60s)], prevent_duplicate"),
        log()
            .with_prevent_duplicate(DEFAULT_DUPLICATE_WINDOW)
            .unwrap()
    );
    assert_eq!(
        built("cost = 1, prevent_duplicate = 3s, rules = [(10, 60s)]"),
        log()
            .with_prevent_duplicate(secs(3))
            .unwrap()
            .with_cost(1)
            .unwrap()
    );
    assert_eq!(
        built("algorithm = fixed_window, rules = [(100, 1m)], cost = 10"),
        Policy::fixed_window(rule(100, secs(60)))
            .with_cost(10)
            .unwrap()
    );
    assert_eq!(
        built("rules = [(1000, 1h)], algorithm = sliding_window"),
        Policy::sliding_window(rule(1000, secs(3600)))
    );
}

#[test]
fn buckets_and_gcra() {
    let rate = |amount, period| Rate::new(amount, period).unwrap();
    assert_eq!(
        built("algorithm = token_bucket(rate = 1/s, burst = 10), cost = 2"),
        Policy::token_bucket(rate(1, secs(1)), 10)
            .unwrap()
            .with_cost(2)
            .unwrap()
    );
    assert_eq!(
        built("algorithm = leaky_bucket(capacity = 5, rate = 30/m,)"),
        Policy::leaky_bucket(rate(30, secs(60)), 5).unwrap()
    );
    assert_eq!(
        built("algorithm = gcra(rate = 100/60s, burst = 20)"),
        Policy::gcra(rate(100, secs(60)), 20).unwrap()
    );
    assert_eq!(
        built("algorithm = gcra(rate = 5/ms, burst = 1)"),
        Policy::gcra(rate(5, Duration::from_millis(1)), 1).unwrap()
    );
}

#[test]
fn numbers_are_refused_with_the_model_messages() {
    assert_eq!(error("rules = [(0, 60s)]"), core(Rule::new(0, secs(60))));
    assert_eq!(
        error("rules = [(10, 0s)]"),
        core(Rule::new(10, Duration::ZERO))
    );
    assert_eq!(
        error("rules = [(10, 60s), (1000, 367d)]"),
        core(Rule::new(1000, secs(367 * 86400)))
    );
    assert_eq!(
        error("rules = [(2251799813685248, 1s)]"),
        core(Rule::new(1 << 51, secs(1)))
    );
    let seven = vec![rule(1, secs(1)); 7];
    assert_eq!(
        error("rules = [(1,1s),(2,1s),(3,1s),(4,1s),(5,1s),(6,1s),(7,1s)]"),
        core(Policy::sliding_log(seven))
    );
    assert_eq!(error("rules = []"), core(Policy::sliding_log(Vec::new())));
    assert_eq!(
        error("rules = [(1, 1s)], cost = 0"),
        core(
            Policy::sliding_log([rule(1, secs(1))])
                .unwrap()
                .with_cost(0)
        )
    );
    assert_eq!(
        error("rules = [(10, 60s), (3, 1s)], cost = 4"),
        "a cost of 4 can never pass: it exceeds the limit of rule 3-per-1s of 3"
    );
    assert_eq!(
        error("rules = [(10, 60s)], prevent_duplicate = 1500ms, cost = 2"),
        "a cost of 2 can never pass: it exceeds the limit of rule 1-per-1500ms of 1"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/s, burst = 10), prevent_duplicate"),
        "prevent_duplicate works with the sliding log only, not with gcra"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 0/s, burst = 20)"),
        core(Rate::new(0, secs(1)))
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/0s, burst = 20)"),
        core(Rate::new(1, Duration::ZERO))
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/400d, burst = 20)"),
        core(Rate::new(1, secs(400 * 86400)))
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/s, burst = 0)"),
        "the burst must be at least 1, got 0"
    );
    assert_eq!(
        error("algorithm = leaky_bucket(rate = 1/s, capacity = 0)"),
        "the capacity must be at least 1, got 0"
    );
    assert_eq!(
        error("algorithm = token_bucket(rate = 1/s, burst = 10), cost = 11"),
        "a cost of 11 can never pass: it exceeds the burst capacity of 10"
    );
    assert_eq!(
        error("algorithm = token_bucket(rate = 1/1d, burst = 1048576)"),
        "the bucket is too large to compute exactly: burst capacity 1048576 at 1/1d needs more than 2^50 sub-units"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/1d, burst = 1048576)"),
        "the burst is too large to compute exactly: burst 1048576 at 1/1d needs more than 2^50 sub-units"
    );
}

#[test]
fn prevent_duplicate_says_it_is_the_rule_too_many() {
    let six = "rules = [(1,1s),(2,1s),(3,1s),(4,1s),(5,1s),(6,1s)], prevent_duplicate";
    let full = Policy::sliding_log(vec![rule(1, secs(1)); 6]).unwrap();
    assert_eq!(
        error(six),
        format!(
            "{}: `prevent_duplicate` adds one",
            core(full.with_prevent_duplicate(DEFAULT_DUPLICATE_WINDOW))
        )
    );
}

#[test]
fn the_algorithm_decides_what_rules_it_takes() {
    assert_eq!(
        error("by = ip"),
        "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`"
    );
    assert_eq!(
        error("algorithm = sliding_log"),
        "missing `rules`: the sliding log needs at least one rule, like `rules = [(10, 60s)]`"
    );
    assert_eq!(
        error("algorithm = fixed_window"),
        "missing `rules`: fixed_window needs exactly one rule, like `rules = [(100, 60s)]`"
    );
    assert_eq!(
        error("algorithm = sliding_window, rules = [(1, 1s), (2, 2s)]"),
        "sliding_window takes exactly one rule, got 2"
    );
    assert_eq!(
        error("algorithm = fixed_window, rules = []"),
        "fixed_window takes exactly one rule, got 0"
    );
    assert_eq!(
        error("rules = [(1, 1s)], algorithm = token_bucket(rate = 1/s, burst = 10)"),
        "token_bucket does not take `rules`: its limit is its `rate` and `burst`, like `token_bucket(rate = 1/s, burst = 10)`"
    );
    assert_eq!(
        error("algorithm = leaky_bucket(rate = 1/s, capacity = 3), rules = [(1, 1s)]"),
        "leaky_bucket does not take `rules`: its limit is its `rate` and `capacity`, like `leaky_bucket(rate = 2/s, capacity = 5)`"
    );
}

#[test]
fn the_run_time_calls_are_the_checked_ones() {
    let tokens = run_time(&args(
        "rules = [(10, 60s), (1, 1500ms)], prevent_duplicate, cost = 1",
    ));
    assert_eq!(
        tokens,
        quote::quote! {
            ::limiter_tower::__private::Policy::sliding_log([
                ::limiter_tower::__private::Rule::new(10, ::core::time::Duration::from_secs(60))?,
                ::limiter_tower::__private::Rule::new(1, ::core::time::Duration::from_millis(1500))?
            ])?
            .with_prevent_duplicate(::limiter_tower::__private::DEFAULT_DUPLICATE_WINDOW)?
            .with_cost(1)?
        }
        .to_string()
    );
    let tokens = run_time(&args("algorithm = gcra(rate = 100/m, burst = 20)"));
    assert_eq!(
        tokens,
        quote::quote! {
            ::limiter_tower::__private::Policy::gcra(
                ::limiter_tower::__private::Rate::new(100, ::core::time::Duration::from_secs(60))?,
                20
            )?
        }
        .to_string()
    );
}
