//! The regional store across three "regions" (a `redis-server` each,
//! every link between them delayed by a proxy): one quota, and blocks and
//! penalties, reaching every region.

mod regional_control;
mod regions;
