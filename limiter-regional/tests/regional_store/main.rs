//! The regional store on three `redis-server` processes: the store
//! conformance suite, as any store crate runs it, and how regions share a
//! window's quota, at times the tests choose.

mod conformance;
mod leases;
