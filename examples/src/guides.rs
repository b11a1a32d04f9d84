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

// Not yet: business.md and control.md, whose snippets compile but for one
// import each, `limiter_core::Acquired` and `limiter_core::BlockList`: this
// crate depends on limiter-tower, which does not re-export them. They join
// once limiter-examples has limiter-core as a dev-dependency (their hidden
// `use limiter_tower as limiter_core;` lines then go).
//
// Nor README.md, whose snippets compile too (checked with its program's
// fence `rust,no_run`): its program serves until stopped, so it can only be
// a doc test marked `no_run`, and `examples/tests/readme.rs` finds it by its
// fence `rust`.
