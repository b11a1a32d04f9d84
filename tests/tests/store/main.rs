//! The stores against real Redis and Valkey processes: standalone,
//! Cluster and Sentinel, the Lua scripts, coalescing and hot keys,
//! failures, failovers and futures dropped mid-way. Every module is one
//! concern; `.ci/run` runs this binary against Valkey as well.

mod admin_stall;
mod block_bounds;
mod cancellation;
mod capabilities;
mod cluster;
mod cluster_failover;
mod coalesce;
mod coalesce_deadlines;
mod coalesce_failure;
mod coalesce_sliding_log;
mod concurrency;
mod differential;
mod failure;
mod hot_lease;
mod hot_shard_sample;
mod lua_scripts;
mod node_batch;
mod programmatic;
mod redis_oom;
mod refunds;
mod rolling_upgrade;
mod sentinel;

/// One Cluster failover world at a time: two clusters under load on a
/// 2-core machine would delay each other's calls past their deadlines.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
