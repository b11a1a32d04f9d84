//! The setters both layers have, each written once, with its docs. The
//! router layer's setting applies to every limit below it, a limit's to
//! itself; where both set one (the failure policy, waiting), the limit's
//! applies.

use limiter_core::OnStoreError;

use crate::key::{ListedIdentity, Source};
use crate::options::CommonOptions;

/// Where a layer keeps what the common setters set.
pub(crate) trait Configure {
    /// The allow lists, shadow mode and waiting the layer sets.
    fn common(&mut self) -> &mut CommonOptions;

    /// Sets the layer's failure policy.
    fn set_on_store_error(&mut self, policy: OnStoreError);

    /// How the layer reads a plain entry of its identity lists: the kind
    /// of its limit's `by`; `None` for the router layer (an address when
    /// it parses as one, else a user).
    fn plain_identities(&self) -> Option<Source>;
}

/// The list entries as keys write the identities (see [`ListedIdentity`]).
pub(crate) fn listed<L: Configure, I: Into<ListedIdentity>>(
    layer: &L,
    identities: impl IntoIterator<Item = I>,
) -> Vec<String> {
    let source = layer.plain_identities();
    identities
        .into_iter()
        .filter_map(|listed| listed.into().key_text(source.as_ref()))
        .collect()
}

/// The common setters of a layer that implements [`Configure`], as
/// inherent methods (so users need no trait in scope). Their docs are
/// written here once for both layers: `$limits` names what a setting
/// reaches ("every limit below", "this limit"), and the invocation adds
/// what is the layer's own (an example) after them:
///
/// ```text
/// common_setters! {
///     MyLayer, "every limit below";
///     /// more docs, if any
///     fn on_store_error;
///     fn allow_ips;
///     fn allow_identities;
///     fn deny_ips;
///     fn deny_identities;
///     fn shadow;
///     fn wait;
/// }
/// ```
macro_rules! common_setters {
    (
        $layer:ident, $limits:literal;
        $(#[$on_store_error:meta])* fn on_store_error;
        $(#[$allow_ips:meta])* fn allow_ips;
        $(#[$allow_identities:meta])* fn allow_identities;
        $(#[$deny_ips:meta])* fn deny_ips;
        $(#[$deny_identities:meta])* fn deny_identities;
        $(#[$shadow:meta])* fn shadow;
        $(#[$wait:meta])* fn wait;
    ) => {
        impl $layer {
            #[doc = concat!("What ", $limits, " decides when the store fails: the local")]
            /// fallback, fail open, or fail closed (503 with `Retry-After`).
            /// A limit's own setting
            /// ([`LimitLayer::on_store_error`](crate::LimitLayer::on_store_error),
            /// or `on_store_error = ...` in `#[rate_limit]`) applies instead
            /// of the router layer's
            /// ([`LimiterLayer::on_store_error`](crate::LimiterLayer::on_store_error)),
            /// which is the local fallback unless set.
            $(#[$on_store_error])*
            pub fn on_store_error(mut self, policy: ::limiter_core::OnStoreError) -> Self {
                $crate::setters::Configure::set_on_store_error(&mut self, policy);
                self
            }

            #[doc = concat!("Clients whom ", $limits, " lets through, neither checking nor")]
            /// counting their requests nor adding its RateLimit fields to
            /// them. The client is found as for `by = ip` (the peer, or
            /// behind [trusted proxies](crate::LimiterLayer::trusted_proxies)
            /// the forwarded client), so a client cannot buy a bypass with a
            /// forged header; a request without its peer address is never on
            /// the list. A limit lets through the clients of its own list and
            /// of the router layer's. Counted in
            /// `limiter_decisions_total{outcome="bypassed",source="allow_list"}`.
            $(#[$allow_ips])*
            pub fn allow_ips(mut self, nets: impl IntoIterator<Item = ::ipnet::IpNet>) -> Self {
                $crate::setters::Configure::common(&mut self).allow.add_nets(nets);
                self
            }

            #[doc = concat!("Identities whom ", $limits, " lets through, as")]
            /// [`allow_ips`](Self::allow_ips) lets clients through: a request
            /// passes a limit when its identity for that limit is listed, of
            /// the same kind, so a client cannot send an allowed user's name
            /// as its API key to pass a limit by key. An entry is typed or
            /// plain text; [`ListedIdentity`](crate::ListedIdentity) says
            /// which kind plain text names on each layer.
            $(#[$allow_identities])*
            pub fn allow_identities<I: Into<$crate::ListedIdentity>>(
                mut self,
                identities: impl IntoIterator<Item = I>,
            ) -> Self {
                let listed = $crate::setters::listed(&self, identities);
                $crate::setters::Configure::common(&mut self)
                    .allow
                    .add_identities(listed);
                self
            }

            #[doc = concat!("Clients whom ", $limits, " refuses before counting them: their")]
            /// requests get `403 Forbidden` with a problem of type
            /// [`DENIED`](crate::DENIED) and reach no handler. The client is
            /// found, and both layers' lists apply, as for
            /// [`allow_ips`](Self::allow_ips); a deny list is checked before
            /// the allow list. Counted in
            /// `limiter_decisions_total{outcome="denied",source="deny_list"}`.
            $(#[$deny_ips])*
            pub fn deny_ips(mut self, nets: impl IntoIterator<Item = ::ipnet::IpNet>) -> Self {
                $crate::setters::Configure::common(&mut self).deny.add_nets(nets);
                self
            }

            #[doc = concat!("Identities whom ", $limits, " refuses, as")]
            /// [`deny_ips`](Self::deny_ips) refuses clients; an identity is
            /// listed as for [`allow_identities`](Self::allow_identities).
            $(#[$deny_identities])*
            pub fn deny_identities<I: Into<$crate::ListedIdentity>>(
                mut self,
                identities: impl IntoIterator<Item = I>,
            ) -> Self {
                let listed = $crate::setters::listed(&self, identities);
                $crate::setters::Configure::common(&mut self)
                    .deny
                    .add_identities(listed);
                self
            }

            #[doc = concat!("Shadow mode for ", $limits, ": requests are checked and counted as")]
            /// usual, but never denied. A request a limit would have denied
            /// is counted in `limiter_shadow_denied_total` and logged at
            /// `info`, and carries the RateLimit fields of its denial. A
            /// limit is in shadow mode when it or the router layer above it
            /// is, and then waits for nothing. Use it to see what new limits
            /// would do before enforcing them.
            $(#[$shadow])*
            pub fn shadow(mut self, on: bool) -> Self {
                $crate::setters::Configure::common(&mut self).shadow = on;
                self
            }

            #[doc = concat!("Lets ", $limits, " wait up to `max` for a request's retry time")]
            /// instead of answering 429, for every algorithm and for the
            /// concurrency limit: a request over the limit whose retry time
            /// is within `max` waits for it and is checked again, in turn
            /// with the other waiters of its key (see
            /// [`Waiters`](crate::Waiters)), and answered 429 only once
            /// waiting cannot help. A client that goes away while it waits
            /// leaves the queue. A limit's own setting applies instead of
            /// the router layer's. How many may wait at once, and the clock,
            /// are the router layer's
            /// ([`LimiterLayer::waiters`](crate::LimiterLayer::waiters)).
            $(#[$wait])*
            pub fn wait(mut self, max: ::limiter_core::MaxWait) -> Self {
                $crate::setters::Configure::common(&mut self).wait = Some(max);
                self
            }
        }
    };
}

pub(crate) use common_setters;
