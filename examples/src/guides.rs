//! The guides' Rust snippets, compiled by `cargo test --doc` as doc tests:
//! what a user copies from `docs/*.md` builds.

#[doc = include_str!("../../docs/algorithms.md")]
mod algorithms {}

#[doc = include_str!("../../docs/hot-keys.md")]
mod hot_keys {}

#[doc = include_str!("../../docs/operations.md")]
mod operations {}

#[doc = include_str!("../../docs/regions.md")]
mod regions {}

#[doc = include_str!("../../docs/stores.md")]
mod stores {}

#[doc = include_str!("../../docs/ugc.md")]
mod ugc {}

#[doc = include_str!("../../docs/layers.md")]
mod layers {}

#[doc = include_str!("../../docs/programmatic.md")]
mod programmatic {}

#[doc = include_str!("../../docs/business.md")]
mod business {}

#[doc = include_str!("../../docs/control.md")]
mod control {}

#[doc = include_str!("../../docs/runbook.md")]
mod runbook {}

// The README's program is `no_run`: it serves until stopped
// (`examples/tests/readme.rs` runs it as the quickstart binary).
#[doc = include_str!("../../README.md")]
mod readme {}
