//! Handles on the state the limits keep: what an identity's limits would
//! answer now, and forgetting them (after a captcha, an administrator's
//! decision); with an admin router an application mounts behind its own
//! authentication ([`Control::router`]).

mod attempt;
mod blocks;
mod calls;
mod offenders;
mod overrides;
mod router;
mod state;
mod unanswered;

pub use attempt::AttemptResponse;
pub use offenders::{Offender, Reporting, TopOffenders, UnknownLimit};
pub use overrides::{OverrideState, WrittenRules};
pub use router::DEFAULT_API_KEY_HEADER;
#[allow(deprecated)]
pub use state::OverrideHeld;
use state::states_of;
pub use state::{LimitInfo, LimitState, OverrideInForce};
pub use unanswered::changes_need_the_store;

use std::fmt;
use std::sync::Arc;

use limiter_core::{Change, Decision, Error, Identity, IdentityKind, Key, Policy, required};

use crate::context::Context;
use crate::key::Source;
use crate::limit::LimitLayer;
use crate::limit::RouteLimit;

/// The limits of a [`LimiterLayer`](crate::LimiterLayer), read and
/// reset per identity through the layer's own store: the same guard, deny
/// cache and hot-key state as its requests, so a reset is honoured by this
/// instance at once.
///
/// Made by [`LimiterLayer::control`](crate::LimiterLayer::control)
/// once the layer is configured; each limit it answers for is named with
/// [`limit`](Self::limit) (a `#[rate_limit]` handler's is
/// `handler::limit()`). Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::post};
/// use limiter_tower::{Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let replies = LimitLayer::new(
///     "replies",
///     Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?,
///     KeySource::user(),
/// );
/// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()))
///     .user(|parts| parts.headers.get("x-user-id")?.to_str().ok().map(str::to_owned));
/// let control = layer.control().limit("POST /replies", &replies);
/// let app: Router = Router::new()
///     .route("/replies", post(|| async { "sent" }).layer(replies))
///     .layer(layer);
///
/// let alice = Identity::user("alice");
/// let limits = control.limits(&alice).await?;
/// assert_eq!(limits[0].route, "POST /replies");
/// assert_eq!(limits[0].remaining, 5);
/// assert_eq!(control.reset(&alice).await?, 1);
/// // The address 127.0.0.1 has no limit here: the limit counts by user.
/// assert!(control.limits(&Identity::ip([127, 0, 0, 1].into())).await?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct Control {
    /// The router layer's settings, which checks made through this handle
    /// are decided under, as its requests are.
    context: Arc<Context>,
    limits: Arc<[Named]>,
    api_key_header: Box<str>,
    /// Other layers' handles, whose limits this one answers for too
    /// ([`merge`](Self::merge)); none of them holds others.
    merged: Arc<[Control]>,
    /// This instance's name, which the top offenders' route answers.
    instance: Arc<str>,
}

/// A limit and the route it guards.
struct Named {
    route: Box<str>,
    limit: Arc<RouteLimit>,
}

impl Control {
    pub(crate) fn new(context: &Arc<Context>) -> Self {
        Self {
            context: Arc::clone(context),
            limits: Arc::new([]),
            api_key_header: router::DEFAULT_API_KEY_HEADER.into(),
            merged: Arc::new([]),
            instance: context.shared.offenders.instance(),
        }
    }

    /// Answers for `limit` too, on `route` (the label its states carry).
    /// A global limit is nobody's: it is left out of every identity's.
    pub fn limit(mut self, route: impl Into<String>, limit: &LimitLayer) -> Self {
        let mut limits: Vec<Named> = self
            .limits
            .iter()
            .map(|n| Named {
                route: n.route.clone(),
                limit: Arc::clone(&n.limit),
            })
            .collect();
        limits.push(Named {
            route: route.into().into_boxed_str(),
            limit: Arc::clone(&limit.limit),
        });
        self.limits = limits.into();
        self
    }

    /// Answers for `other`'s limits too (those of another
    /// [`LimiterLayer`](crate::LimiterLayer), whose routes have a store
    /// of their own, such as a regional store), each through its own
    /// layer's store: [`limits`](Self::limits) and [`reset`](Self::reset)
    /// reach the store of each limit, [`block`](Self::block) and
    /// [`unblock`](Self::unblock) every store (this one's first), and
    /// [`blocked`](Self::blocked) and [`blocks`](Self::blocks) read them
    /// all. [`check`](Self::check), [`attempt`](Self::attempt) and the plans
    /// stay this handle's own store's.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::{Identity, KeySource, LimitLayer, Limiter, LimiterLayer, MemoryStore, Policy, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let per_minute = Policy::sliding_log([Rule::new(5, Duration::from_secs(60))?])?;
    /// let search = LimitLayer::new("search", per_minute, KeySource::user());
    /// // The search route's own store (a regional one, say), inside the app's.
    /// let search_layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    /// let app_layer = LimiterLayer::new(Limiter::new(MemoryStore::new()));
    /// let control = app_layer
    ///     .control()
    ///     .merge(search_layer.control().limit("GET /search", &search));
    ///
    /// let alice = Identity::user("alice");
    /// assert_eq!(control.limits(&alice).await?[0].route, "GET /search");
    /// control.block(&alice, Duration::from_secs(60)).await?;
    /// // Blocked in both stores: on every route.
    /// assert!(search_layer.control().blocked(&alice).is_some());
    /// assert!(app_layer.control().blocked(&alice).is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn merge(mut self, other: Control) -> Self {
        let mut merged = self.merged.to_vec();
        let nested = Arc::clone(&other.merged);
        merged.push(Control {
            merged: Arc::new([]),
            ..other
        });
        merged.extend(nested.iter().cloned());
        self.merged = merged.into();
        self
    }

    /// This handle, then each it merged: each with its own store.
    fn parts(&self) -> impl Iterator<Item = &Control> {
        std::iter::once(self).chain(self.merged.iter())
    }

    /// What each limit of `identity` would answer its next request, rule
    /// by rule, counting nothing: the limits that count by its kind (by
    /// address for [`Identity::ip`], by user for [`Identity::user`], by
    /// that header for [`Identity::header`], by a custom function for
    /// [`Identity::custom`]). Each is read under the policy its next
    /// check takes: a live override's rules while one holds (a limit
    /// switched off answers as nothing checked), else the limit's own (a
    /// limit with plans under its own policy).
    pub async fn limits(&self, identity: &Identity) -> Result<Vec<LimitState>, Error> {
        let mut states = Vec::new();
        for part in self.parts() {
            for (named, key) in part.keys_of(identity) {
                let limit = &named.limit;
                let context = limit.context.as_ref().unwrap_or(&part.context);
                let in_force = limit.in_force(context);
                let policy = in_force.override_rules().unwrap_or(limit.policy());
                let decision = if in_force.checked() {
                    let peek = required(
                        part.context.shared.store.capabilities().as_key_state(),
                        "reading a key without counting",
                    )?;
                    peek.peek(&key, policy, policy.cost()).await?
                } else {
                    Decision::unchecked(policy)
                };
                let kind = part.kind_of(&limit.source.0);
                states.extend(states_of(named, kind, &in_force, policy, &decision));
            }
        }
        Ok(states)
    }

    /// Forgets the state of every limit of `identity` (as
    /// [`limits`](Self::limits) finds them), the denials its penalties
    /// counted too; answers how many limits. Each key is forgotten by the
    /// store and by every instance (deny caches, leases, samples). A block
    /// stays until [`unblock`](Self::unblock).
    pub async fn reset(&self, identity: &Identity) -> Result<usize, Error> {
        let mut count = 0;
        for (i, part) in self.parts().enumerate() {
            let keys = part.keys_of(identity);
            // A merged handle none of whose limits counts this identity
            // has nothing to reset.
            if i > 0 && keys.is_empty() {
                continue;
            }
            count += part.reset_keys(keys).await?;
        }
        Ok(count)
    }

    /// Forgets `keys` (this handle's limits') in its store.
    async fn reset_keys(&self, keys: Vec<(&Named, Key)>) -> Result<usize, Error> {
        let count = keys.len();
        let resets = required(
            self.context.shared.store.capabilities().as_key_state(),
            "resetting a key",
        )?;
        for (named, key) in keys {
            let policy = named.limit.policy();
            let penalized = named
                .limit
                .options
                .as_ref()
                .is_some_and(|b| b.penalty.is_some());
            if penalized {
                let penalty_key = Key::from(format!("{key}:penalty"));
                resets.reset(&penalty_key, policy).await?;
            }
            resets.reset(&key, policy).await?;
        }
        Ok(count)
    }

    /// Gives `identity` (an API key's [`Identity::header`], a user: any
    /// identity) the plan named `plan` (`None`: the application's default),
    /// kept by the store so that every instance sharing it answers the same
    /// once this returns; read back with [`assigned_plan`](Self::assigned_plan),
    /// typically by a plan resolver ([`LimitLayer::plans`](crate::LimitLayer::plans)).
    /// At most [`MAX_ASSIGNED_PLANS`](limiter_core::MAX_ASSIGNED_PLANS)
    /// identities have a plan: past it, a plan for a new one is refused.
    pub async fn assign_plan(&self, identity: &Identity, plan: Option<&str>) -> Result<(), Error> {
        let key = self.identity_key(identity);
        let shared = self.context.shared.store.capabilities().as_shared_control();
        let assign = Change::AssignPlan { key: &key, plan };
        required(shared, "plan assignments")?.change(assign).await
    }

    /// The plan `identity` has, as this instance knows it now (without a
    /// call); `None` for the default.
    pub fn assigned_plan(&self, identity: &Identity) -> Option<Arc<str>> {
        let tables = self.context.shared.tables.as_ref()?;
        tables.assigned_plan(&self.identity_key(identity))
    }

    /// How many identities have a plan other than the default.
    pub fn assigned_plans(&self) -> usize {
        (self.context.shared.tables.as_ref()).map_or(0, |tables| tables.plans().len())
    }

    /// How long the block of `key` (an identity's) lasts, as this instance
    /// knows it.
    fn block_of(&self, key: &str) -> Option<std::time::Duration> {
        self.context.shared.tables.as_ref()?.blocked(key)
    }

    /// `{prefix}:{identity}`: the key of its block and plan, and how its
    /// limits' keys start (append `:{action}` for a key of
    /// [`check`](Self::check)). An address is written as the layer's
    /// requests write it: an IPv6 address as its network (a /64 by
    /// default), where [`Limiter::identity_key`](limiter_core::Limiter::identity_key)
    /// writes the address.
    pub fn identity_key(&self, identity: &Identity) -> String {
        let mut key = String::from(&*self.context.shared.key_start);
        self.push_identity(&mut key, identity);
        key
    }

    fn push_identity(&self, key: &mut String, identity: &Identity) {
        match identity.address() {
            // An IPv4-mapped address is the IPv4 one, as the layer finds it.
            Some((ip, None)) => self.context.client_ip.push_identity(key, ip.to_canonical()),
            _ => identity.push_key(key),
        }
    }

    /// The key of each limit that applies to `identity`.
    fn keys_of(&self, identity: &Identity) -> Vec<(&Named, Key)> {
        self.limits
            .iter()
            .filter_map(|named| Some((named, self.key_of(&named.limit, identity)?)))
            .collect()
    }

    /// The key of `limit` for `identity`, as its requests write it; `None`
    /// when the limit does not count by `identity`'s kind (a global limit;
    /// a limit by address, and `identity` is a user...).
    fn key_of(&self, limit: &RouteLimit, identity: &Identity) -> Option<Key> {
        let counts_by_kind = match (&limit.source.0, identity.kind()) {
            (Source::Ip | Source::UserOrIp, IdentityKind::Address)
            | (Source::User | Source::UserOrIp, IdentityKind::User)
            | (Source::Custom(_), IdentityKind::Custom) => true,
            (Source::Header(name), IdentityKind::Header) => {
                identity.header_name() == Some(name.as_str())
            }
            _ => false,
        };
        if !counts_by_kind {
            return None;
        }
        let start = limit
            .key_start
            .as_deref()
            .unwrap_or(&self.context.shared.key_start);
        let push = |key: &mut String| self.push_identity(key, identity);
        Some(Key::of_identity(start, push, limit.name()))
    }

    /// Sets the name of this instance, under which its top offenders are
    /// published for the other instances and which the admin router's
    /// `GET /top/{limit}` answers in its `limiter-instance` header (by
    /// default the host's name and the process id, `web-1-4242`, followed
    /// by `-2`, `-3`... for each router layer made after the first in the
    /// process). Names the layer's instance for every handle of it: set it
    /// before serving, and give each instance sharing a store its own.
    /// Visible ASCII: any other character is replaced by `_`.
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance = limiter_core::decide::sanitized(&id.into());
        // Its counts are published under the same name.
        (self.context.shared.offenders).set_instance(Arc::clone(&self.instance));
        self
    }

    /// Sets the header whose value the admin router's kind `key` names
    /// (`x-api-key` by default).
    pub fn api_key_header(mut self, name: &str) -> Self {
        self.api_key_header = name.to_ascii_lowercase().into_boxed_str();
        self
    }

    /// The kind a limit counting by `source` counts, as the admin routes
    /// name it, and the header's name for another header than the API
    /// key's.
    pub(super) fn kind_of(&self, source: &Source) -> (&'static str, Option<String>) {
        match source {
            Source::Ip => ("ip", None),
            Source::User => ("user", None),
            Source::UserOrIp => ("user_or_ip", None),
            Source::Header(name) if name.as_str() == &*self.api_key_header => ("key", None),
            Source::Header(name) => ("header", Some(name.as_str().to_owned())),
            Source::Custom(_) => ("custom", None),
            Source::Global => ("global", None),
        }
    }
}

impl fmt::Debug for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("key_start", &self.context.shared.key_start)
            .field(
                "limits",
                &self.limits.iter().map(|n| &*n.route).collect::<Vec<_>>(),
            )
            .field("merged", &self.merged)
            .finish_non_exhaustive()
    }
}
