//! What the router-level layer holds for every limit below it: the store,
//! the key prefix, how to find clients and users, and which headers to send.

use std::fmt;

use http::StatusCode;
use limiter_core::GuardConfig;
use limiter_core::decide::{Shared, StoreBuilder};

use crate::client_ip::ClientIp;
use crate::key::Resolver;
use crate::options::CommonOptions;
use crate::response::HeaderOptions;

/// The router layer's settings, shared by every limit below it.
#[derive(Clone)]
pub(crate) struct Context {
    /// What the decision pipeline shares across the limits below: the
    /// store, its tables, the failure policy, the key prefix, the waiting
    /// queues and the top offenders.
    pub(crate) shared: Shared,
    pub(crate) build_store: StoreBuilder,
    pub(crate) guard: GuardConfig,
    pub(crate) client_ip: ClientIp,
    pub(crate) user: Option<Resolver>,
    pub(crate) headers: HeaderOptions,
    pub(crate) missing_identity: StatusCode,
    /// Allow lists, shadow mode and waiting for every limit below: `None`
    /// when none is configured.
    pub(crate) options: Option<Box<CommonOptions>>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("shared", &self.shared)
            .field("guard", &self.guard)
            .field("client_ip", &self.client_ip)
            .field("user", &self.user.as_ref().map(|_| ".."))
            .field("headers", &self.headers)
            .field("missing_identity", &self.missing_identity)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}
