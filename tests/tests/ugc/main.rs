//! The UGC example server as its users meet it: every route's exact
//! answers over real HTTP, on memory and on Redis, with its environment
//! settings, its leased global quota, and the runbook's commands.

mod runbook;
mod ugc_business;
mod ugc_redis;
mod ugc_server;
mod ugc_trending;
