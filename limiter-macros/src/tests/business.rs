//! The business arguments: parsed beside the others, checked through
//! limiter-model, each mistake named.

use crate::check::{self, Layer};
use crate::expand;
use crate::parse::Args;

fn built(attr: &str) -> Result<String, String> {
    let args: Args = syn::parse_str(attr).map_err(|e| e.to_string())?;
    check::limit(&args)
        .map(|limit| expand::calls(&limit.business).to_string())
        .map_err(|e| e.to_string())
}

#[test]
fn every_business_argument_becomes_a_setter_call() {
    let calls = built(
        r#"rules = [(5, 60s)], plans = plan_of, cost = batch::size, allow = ["10.0.0.0/8", "::1"],
           allow_identities = ["partner"], shadow, wait = 1500ms, wait_when = asks, concurrency = 3"#,
    )
    .unwrap();
    for call in [
        ". plans (",
        ". cost (",
        ". allow_ips ([:: limiter_tower :: __private :: listed_net (\"10.0.0.0/8\") , :: limiter_tower :: __private :: listed_net (\"::1\")])",
        ". allow_identities ([\"partner\"])",
        ". shadow (true)",
        "MaxWait :: new (:: core :: time :: Duration :: from_millis (1500))",
        ". wait_when (",
        ". concurrency (",
    ] {
        assert!(calls.contains(call), "{call} not in {calls}");
    }
}

#[test]
fn a_concurrency_limit_alone_needs_no_rules() {
    let args: Args = syn::parse_str("concurrency = 2, by = user").unwrap();
    assert!(args.concurrency_alone().is_some());
    let limit = check::limit(&args).unwrap();
    assert!(matches!(limit.layer, Layer::Concurrency(max) if max.value == 2));
    assert!(limit.business.concurrency.is_none());
    let args: Args = syn::parse_str("concurrency = 2, rules = [(1, 1s)]").unwrap();
    assert!(args.concurrency_alone().is_none());
}

#[test]
fn mistakes_are_named() {
    assert_eq!(
        built("concurrency = 0").unwrap_err(),
        "a concurrency limit must allow at least 1 request in flight, got 0"
    );
    assert_eq!(
        built("rules = [(1, 1s)], wait = 367d").unwrap_err(),
        "a request waits 1ms to 366 days for its retry time, got 367d"
    );
    assert!(
        built("rules = [(1, 1s)], wait_when = f")
            .unwrap_err()
            .contains("needs `wait = ...`")
    );
    assert!(
        built(r#"allow = ["example.com"]"#)
            .unwrap_err()
            .contains("is not an IP network")
    );
    assert_eq!(
        built("shadow, shadow").unwrap_err(),
        "duplicate argument `shadow`"
    );
    assert_eq!(
        built("cost = 2, cost = f").unwrap_err(),
        "duplicate argument `cost`"
    );
    assert_eq!(
        built("wait = 2").unwrap_err(),
        "the longest wait needs a unit (ms, s, m, h or d), like `2s`"
    );
}
