//! The regional store across three "regions" (a `redis-server` each,
//! every link between them delayed by a proxy): one quota, and blocks and
//! penalties, reaching every region.

mod regional_control;
mod regions;

/// One world at a time: three to six Redis servers and six proxies per
/// world load a 2-core machine enough to blur the latencies measured.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
