//! Attacks replayed against the UGC server, the real `ugc` binary or its
//! router in process, so that each defence stays: forged client addresses,
//! hostile identities and bodies, slowloris, floods of distinct keys. One
//! module per attack surface.

#[path = "adversarial/client_ip.rs"]
mod client_ip;
#[path = "adversarial/flood.rs"]
mod flood;
#[path = "adversarial/http_input.rs"]
mod http_input;
#[path = "adversarial/slowloris.rs"]
mod slowloris;
