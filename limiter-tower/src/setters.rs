//! The setters both layers have, each written once. The router layer's
//! setting applies to every limit below it, a limit's to itself; where
//! both set one (the failure policy, waiting), the limit's applies.
//!
//! Each layer keeps its own docs for them: what a setting means differs
//! between a router and one route, and a reader of either layer finds
//! them where its other setters are.

use limiter_core::OnStoreError;

use crate::business::Common;
use crate::key::{ListedIdentity, Source};

/// Where a layer keeps what the common setters set.
pub(crate) trait Configure {
    /// The allow lists, shadow mode and waiting the layer sets.
    fn common(&mut self) -> &mut Common;

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
/// inherent methods (so users need no trait in scope), each with the docs
/// the invocation gives it:
///
/// ```text
/// common_setters! {
///     MyLayer;
///     /// docs
///     fn on_store_error;
///     /// docs
///     fn allow_ips;
///     /// docs
///     fn allow_identities;
///     /// docs
///     fn deny_ips;
///     /// docs
///     fn deny_identities;
///     /// docs
///     fn shadow;
///     /// docs
///     fn wait;
/// }
/// ```
macro_rules! common_setters {
    (
        $layer:ident;
        $(#[$on_store_error:meta])* fn on_store_error;
        $(#[$allow_ips:meta])* fn allow_ips;
        $(#[$allow_identities:meta])* fn allow_identities;
        $(#[$deny_ips:meta])* fn deny_ips;
        $(#[$deny_identities:meta])* fn deny_identities;
        $(#[$shadow:meta])* fn shadow;
        $(#[$wait:meta])* fn wait;
    ) => {
        impl $layer {
            $(#[$on_store_error])*
            pub fn on_store_error(mut self, policy: ::limiter_core::OnStoreError) -> Self {
                $crate::setters::Configure::set_on_store_error(&mut self, policy);
                self
            }

            $(#[$allow_ips])*
            pub fn allow_ips(mut self, nets: impl IntoIterator<Item = ::ipnet::IpNet>) -> Self {
                $crate::setters::Configure::common(&mut self).allow.add_nets(nets);
                self
            }

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

            $(#[$deny_ips])*
            pub fn deny_ips(mut self, nets: impl IntoIterator<Item = ::ipnet::IpNet>) -> Self {
                $crate::setters::Configure::common(&mut self).deny.add_nets(nets);
                self
            }

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

            $(#[$shadow])*
            pub fn shadow(mut self, on: bool) -> Self {
                $crate::setters::Configure::common(&mut self).shadow = on;
                self
            }

            $(#[$wait])*
            pub fn wait(mut self, max: ::limiter_core::MaxWait) -> Self {
                $crate::setters::Configure::common(&mut self).wait = Some(max);
                self
            }
        }
    };
}

pub(crate) use common_setters;
