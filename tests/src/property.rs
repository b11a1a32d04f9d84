//! The property tests' runner.

use std::future::Future;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Checks `cases` cases of `strategy`, failing on the first case `check`
/// rejects, shrunk; no failure file is written, so every run draws afresh.
pub fn each_case<S: Strategy>(
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
    .run(&strategy, check)
    .unwrap();
}

/// [`each_case`] for a check that is async, each case run on `runtime`.
pub fn each_case_on<S: Strategy, F: Future<Output = Result<(), TestCaseError>>>(
    runtime: &tokio::runtime::Runtime,
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> F,
) {
    each_case(cases, strategy, |case| runtime.block_on(check(case)));
}
