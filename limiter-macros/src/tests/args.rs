//! The attribute's syntax: every value parses, every mistake names itself.

use crate::parse::{Algorithm, AlgorithmKind, Args, By, OnStoreError};

fn args(attr: &str) -> Args {
    syn::parse_str(attr).unwrap_or_else(|err| panic!("`{attr}` does not parse: {err}"))
}

fn error(attr: &str) -> String {
    match syn::parse_str::<Args>(attr) {
        Ok(_) => panic!("`{attr}` parsed"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn every_argument_parses() {
    let args = args(
        r#"rules = [(10, 60s), (20, 120s)], by = header("x-api-key"), prevent_duplicate = 3s,
           key = "posts", message = "slow down", cost = 1, algorithm = sliding_log,
           on_store_error = fail_closed"#,
    );
    assert_eq!(args.rules.map(|rules| rules.value.rules.len()), Some(2));
    assert!(
        matches!(args.by.map(|by| by.value), Some(By::Header(name)) if name.value() == "x-api-key")
    );
    let window = args
        .prevent_duplicate
        .and_then(|p| p.value)
        .map(|w| w.value);
    assert_eq!(window, Some(std::time::Duration::from_secs(3)));
    assert_eq!(
        args.key.map(|key| key.value.value()).as_deref(),
        Some("posts")
    );
    assert_eq!(
        args.message.map(|m| m.value.value()).as_deref(),
        Some("slow down")
    );
    assert_eq!(args.cost.map(|cost| cost.value.value), Some(1));
    assert!(matches!(
        args.algorithm.map(|a| a.value.kind),
        Some(AlgorithmKind::SlidingLog)
    ));
    assert!(matches!(
        args.on_store_error.map(|p| p.value),
        Some(OnStoreError::FailClosed)
    ));
}

#[test]
fn by_values() {
    let by = |attr: &str| args(attr).by.map(|by| by.value);
    assert!(by("").is_none());
    assert!(matches!(by("by = ip"), Some(By::Ip)));
    assert!(matches!(by("by = user"), Some(By::User)));
    assert!(matches!(by("by = user_or_ip"), Some(By::UserOrIp)));
    assert!(matches!(by("by = global"), Some(By::Global)));
    let Some(By::Custom(path)) = by("by = custom(crate::keys::tenant)") else {
        panic!("not custom");
    };
    assert_eq!(quote::quote!(#path).to_string(), "crate :: keys :: tenant");
}

#[test]
fn failure_policies() {
    let policy = |attr: &str| args(attr).on_store_error.map(|p| p.value);
    assert!(matches!(
        policy("on_store_error = fallback"),
        Some(OnStoreError::Fallback(1))
    ));
    assert!(matches!(
        policy("on_store_error = fallback(instances = 4)"),
        Some(OnStoreError::Fallback(4))
    ));
    assert!(matches!(
        policy("on_store_error = fail_open"),
        Some(OnStoreError::FailOpen)
    ));
    assert_eq!(
        error("on_store_error = retry"),
        "unknown failure policy `retry`, expected one of: `fallback`, `fail_open`, `fail_closed`"
    );
    assert_eq!(
        error("on_store_error = fallback(instances = 0)"),
        "the number of instances must be at least 1, got 0"
    );
    assert_eq!(
        error("on_store_error = fallback(instances = 4294967296)"),
        "the number of instances must fit in a u32"
    );
    assert_eq!(
        error("on_store_error = fallback(copies = 2)"),
        "unknown fallback argument `copies`, expected `instances`"
    );
}

#[test]
fn algorithms() {
    let algorithm = |attr: &str| -> Algorithm { args(attr).algorithm.unwrap().value };
    let bucket = algorithm("algorithm = leaky_bucket(capacity = 5, rate = 2/s)");
    assert_eq!(bucket.name, "leaky_bucket");
    let AlgorithmKind::LeakyBucket(bucket) = bucket.kind else {
        panic!("not a leaky bucket");
    };
    assert_eq!((bucket.rate.amount.value, bucket.size.value), (2, 5));
    assert!(matches!(
        algorithm("algorithm = fixed_window").kind,
        AlgorithmKind::FixedWindow
    ));
}

#[test]
fn mistakes_in_arguments() {
    assert_eq!(
        error("rule = [(1, 1s)]"),
        "unknown argument `rule`, expected one of: `rules`, `by`, `prevent_duplicate`, `key`, `message`, `cost`, `algorithm`, `on_store_error`, `lease`, `shards`, `sample`, `plans`, `allow_identities`, `allow`, `deny_identities`, `deny`, `shadow`, `wait_when`, `wait`, `concurrency`, `count_when`, `count_failures`, `penalty`"
    );
    assert_eq!(
        error("rules = [(1, 1s)], rules = [(2, 1s)]"),
        "duplicate argument `rules`"
    );
    assert_eq!(
        error("by = ip, rules = [(1, 1s)], by = user"),
        "duplicate argument `by`"
    );
    assert_eq!(error("rules = [(1, 1s)] by = ip"), "expected `,`");
    assert_eq!(
        error("cost = 1s"),
        "the cost of a request is a plain integer like `10`, without a unit or suffix"
    );
    assert_eq!(error(r#"key = """#), "the key prefix must not be empty");
    assert_eq!(
        error(r#"key = "a{b}""#),
        "the key prefix must not contain '{': braces and whitespace would change the key's shape"
    );
}

#[test]
fn mistakes_in_rules() {
    assert_eq!(
        error("rules = [(10, 60x)]"),
        "unknown unit `x` in `60x`: expected ms, s, m, h or d"
    );
    assert_eq!(
        error("rules = [(10, 60)]"),
        "the window of a rule needs a unit (ms, s, m, h or d), like `60s`"
    );
    assert_eq!(
        error("rules = [(10, 99999999999999999d)]"),
        "`99999999999999999d` is too long for a duration"
    );
    assert_eq!(
        error("rules = [(10, 1.5s)]"),
        "expected the window of a rule, an integer with a unit (ms, s, m, h or d) like `60s`"
    );
    assert_eq!(
        error("rules = [(10s, 60s)]"),
        "the limit of a rule is a plain integer like `10`, without a unit or suffix"
    );
    assert_eq!(
        error("rules = [(1, 1s, 2)]"),
        "a rule is `(limit, window)`, like `(10, 60s)`"
    );
    assert_eq!(
        error("rules = [10, 60s]"),
        "expected a rule `(limit, window)`, like `(10, 60s)`"
    );
    assert_eq!(
        error("rules = (10, 60s)"),
        "expected a list of rules, like `[(10, 60s), (20, 120s)]`"
    );
    assert_eq!(
        error("prevent_duplicate = 5"),
        "the prevent_duplicate window needs a unit (ms, s, m, h or d), like `5s`"
    );
}

#[test]
fn mistakes_in_by() {
    assert_eq!(
        error("by = tenant"),
        "unknown `by` value `tenant`, expected one of: `ip`, `user_or_ip`, `user`, `global`, `header`, `custom`"
    );
    assert_eq!(
        error(r#"by = header("X-Api-Key")"#),
        r#"header names are written in lowercase: use "x-api-key""#
    );
    assert_eq!(
        error(r#"by = header("x api key")"#),
        r#"invalid header name "x api key": ' ' is not allowed in a header name"#
    );
    assert_eq!(
        error(r#"by = header("")"#),
        "the header name must not be empty"
    );
    assert_eq!(error("by = custom(1)"), "expected identifier");
}

#[test]
fn mistakes_in_algorithms() {
    assert_eq!(
        error("algorithm = leaky"),
        "unknown algorithm `leaky`, expected one of: `sliding_log`, `fixed_window`, `sliding_window`, `token_bucket`, `leaky_bucket`, `gcra`"
    );
    assert_eq!(
        error("algorithm = token_bucket"),
        "token_bucket needs `rate` and `burst`, like `token_bucket(rate = 1/s, burst = 10)`"
    );
    assert_eq!(
        error("algorithm = leaky_bucket(rate = 1/s)"),
        "leaky_bucket needs `rate` and `capacity`, like `leaky_bucket(rate = 2/s, capacity = 5)`"
    );
    assert_eq!(
        error("algorithm = token_bucket(rate = 1/s, capacity = 5)"),
        "unknown token_bucket argument `capacity`, expected `rate` or `burst`"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/s, burst = 2, burst = 3)"),
        "duplicate argument `burst`"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1/sec, burst = 20)"),
        "unknown unit `sec`: expected ms, s, m, h or d"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1, burst = 20)"),
        "expected `/` and a period, like `1/s` or `100/60s`"
    );
    assert_eq!(
        error("algorithm = gcra(rate = 1s/s, burst = 20)"),
        "a rate is an amount per period, like `1/s` or `100/60s`"
    );
}
