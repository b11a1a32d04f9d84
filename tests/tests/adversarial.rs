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
#[path = "adversarial/regional_recovery.rs"]
mod regional_recovery;
#[path = "adversarial/slowloris.rs"]
mod slowloris;
