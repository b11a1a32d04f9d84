//! Compile-time behaviour of `#[rate_limit]`: every mistake is one clear
//! error on the token to fix (`ui/fail`), and every argument form compiles
//! lint-clean on real axum handlers (`ui/pass`).
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite`, then read them.
#![cfg(feature = "macros")]

#[test]
fn rate_limit_attribute() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
