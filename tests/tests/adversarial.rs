//! Hostile traffic against the UGC example server.

#[path = "adversarial/flood.rs"]
mod flood;
