//! Attacks replayed against the UGC server, the real `ugc` binary or its
//! router in process, so that each defence stays: forged client addresses,
//! hostile identities and bodies, slowloris, floods of distinct keys. One
//! module per attack surface.

#[path = "adversarial/admin.rs"]
mod admin;
#[path = "adversarial/admin_stall_http.rs"]
mod admin_stall_http;
#[path = "adversarial/admin_throttle.rs"]
mod admin_throttle;
#[path = "adversarial/client_ip.rs"]
mod client_ip;
#[path = "adversarial/dropped_connection.rs"]
mod dropped_connection;
#[path = "adversarial/flood.rs"]
mod flood;
#[path = "adversarial/http_input.rs"]
mod http_input;
#[path = "adversarial/identity_kinds.rs"]
mod identity_kinds;
#[path = "adversarial/penalty_flood.rs"]
mod penalty_flood;
#[path = "adversarial/regional_backlog.rs"]
mod regional_backlog;
#[path = "adversarial/regional_partition.rs"]
mod regional_partition;
#[path = "adversarial/regional_reclaim.rs"]
mod regional_reclaim;
#[path = "adversarial/regional_recovery.rs"]
mod regional_recovery;
#[path = "adversarial/regional_share.rs"]
mod regional_share;
#[path = "adversarial/regional_share_behind_junk.rs"]
mod regional_share_behind_junk;
#[path = "adversarial/regional_traffic.rs"]
mod regional_traffic;
#[path = "adversarial/regional_ugc.rs"]
mod regional_ugc;
#[path = "adversarial/regional_world.rs"]
mod regional_world;
#[path = "adversarial/slowloris.rs"]
mod slowloris;
