use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http::request::Parts;
use limiter_core::{GuardConfig, Limiter, OnStoreError, Store, Waiters};
use tower_layer::Layer;

use super::LimiterService;
use crate::client_ip::{ClientIp, ClientIpSource};
use crate::context::Context;
use crate::control::Control;
use crate::options::CommonOptions;
use crate::response::HeaderOptions;
use crate::scope;
use crate::setters::{Configure, common_setters};
use ipnet::IpNet;
use limiter_core::decide::{DEFAULT_PUBLISH_EVERY, Offenders, layer_instance};
use limiter_core::decide::{Shared, store_builder, tables_of};

/// The router-level layer: the store, the key prefix, how to find the client
/// and the user, and which headers to send. Add it once to the router, after
/// the routes (axum's `Router::layer` covers the routes added before it);
/// every `#[rate_limit]` handler and [`LimitLayer`](crate::LimitLayer) below
/// it uses it. Around a service that is not an axum router (hyper, tonic),
/// put it outside the `LimitLayer`s.
///
/// The limits below find it in a thread-local that it sets while it calls
/// and polls them, not in a request extension: an extension costs every
/// request an `Arc` clone, a box, a map insert and their frees, measured
/// with callgrind at about 290 instructions more per allowed request than
/// the thread-local (4,331 against 4,042 over bare axum, in the
/// `http_in_process` bench). The thread-local reaches only what this layer
/// calls and polls on its own thread: axum's routes call their handlers
/// when first polled, so layers between this one and the handlers change
/// nothing, including `Buffer`, but a service that runs a limited route on
/// a task of its own (`tokio::spawn` of the route's future) hides this
/// layer from it; put the `LimiterLayer` below that service
/// (`MethodRouter::layer` works too).
///
/// A limit that finds no `LimiterLayer`, or one without what it needs (a
/// user resolver for `by = user`; for `by = ip`, the peer address in the
/// request), answers 500 and logs why at `error`; in debug builds the body
/// of the 500 says how to fix it. axum boxes each route before a router
/// layer wraps it, and handlers have no hook when their route is built, so
/// the first request to a route is the earliest these can be seen.
///
/// Cheap to clone. Setters take `mut self` and return `Self`.
///
/// ```
/// use axum::{Router, routing::get};
/// use limiter_tower::{Limiter, LimiterLayer, MemoryStore};
///
/// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()))
///     .trusted_proxies(["10.0.0.0/8".parse().unwrap()])
///     .user(|parts| {
///         parts.headers.get("x-user-id")?.to_str().ok().map(str::to_owned)
///     });
/// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(layer);
/// ```
#[derive(Debug, Clone)]
pub struct LimiterLayer {
    context: Arc<Context>,
}

impl LimiterLayer {
    /// A layer over `limiter`'s store, with its key prefix.
    ///
    /// A remote store (Redis) is guarded: every call has a deadline
    /// ([`DEFAULT_DEADLINE`](crate::DEFAULT_DEADLINE)), a circuit breaker
    /// stops calling it while it is down, and the failure policy decides
    /// meanwhile (by default a local fallback limiter with the same rules).
    /// See [`guard`](Self::guard) and [`on_store_error`](Self::on_store_error).
    ///
    /// A store that guards itself ([`Guarded`](crate::Guarded)) is not
    /// guarded again: its own deadline, breaker, deny cache and failure
    /// policy apply, and [`guard`](Self::guard) changes nothing. The failure
    /// policy set by [`on_store_error`](Self::on_store_error), and by each
    /// route, still applies.
    pub fn new<S: Store + Clone>(limiter: Limiter<S>) -> Self {
        scope::note_layer_exists();
        let build_store = store_builder(limiter.store().clone());
        let store = build_store(GuardConfig::default());
        Self {
            context: Arc::new(Context {
                shared: Shared {
                    tables: tables_of(&*store),
                    store,
                    on_store_error: None,
                    key_start: format!("{}:", limiter.prefix()).into(),
                    waiters: Waiters::new(),
                    offenders: Arc::new(Offenders::new(layer_instance(), DEFAULT_PUBLISH_EVERY)),
                },
                build_store,
                guard: GuardConfig::default(),
                client_ip: ClientIp::default(),
                user: None,
                headers: HeaderOptions {
                    on_allowed: true,
                    legacy: false,
                },
                missing_identity: StatusCode::UNAUTHORIZED,
                options: None,
            }),
        }
    }

    /// Handles on this layer's limits: read an identity's state without
    /// counting, reset it, serve both to administrators (see [`Control`]).
    /// Through this layer's store as configured: take it after
    /// [`guard`](Self::guard), so that it shares the guard, the deny cache
    /// and the hot-key state of the layer's requests.
    pub fn control(&self) -> Control {
        Control::new(&self.context)
    }

    /// How often this instance publishes its top offenders through the
    /// store (default 5 s), so that
    /// [`Control::top_denied`](crate::Control::top_denied) on any instance
    /// sharing the store answers one view across all of them, each
    /// instance's counts at most this old. One store call per limit that
    /// denied anyone, per period, never one per denial; a report is read
    /// for three periods, so an instance that stopped leaves the view
    /// within them. `Duration::ZERO`: never published (each instance
    /// answers its own counts). Set before the first request.
    pub fn publish_offenders_every(mut self, every: Duration) -> Self {
        let instance = self.context.shared.offenders.instance();
        self.context().shared.offenders = Arc::new(Offenders::new(instance, every));
        self
    }

    /// The settings every limit below shares.
    pub(crate) fn shared(&self) -> &Arc<Context> {
        &self.context
    }

    fn context(&mut self) -> &mut Context {
        Arc::make_mut(&mut self.context)
    }

    /// How a remote store is guarded: deadline, circuit breaker, failure
    /// policy, deny cache and fallback capacity.
    pub fn guard(mut self, config: GuardConfig) -> Self {
        self.set_guard(config);
        self
    }

    fn set_guard(&mut self, config: GuardConfig) {
        let context = self.context();
        context.guard = config;
        context.shared.store = (context.build_store)(config);
        context.shared.tables = tables_of(&*context.shared.store);
    }

    /// The proxies whose forwarding header is believed (none by default:
    /// the client is the peer address). When the peer is one of them, the
    /// client is the rightmost address in the
    /// [`client_ip_source`](Self::client_ip_source) header that is not one of
    /// them; anyone else's headers are ignored.
    ///
    /// A network written IPv4-mapped (`::ffff:10.0.0.0/104`) is the IPv4
    /// network (`10.0.0.0/8`); any other IPv6 network trusts IPv6 addresses
    /// only (`::/0` trusts no IPv4 peer). A single address is a network of
    /// one: `IpNet::from(ip)`.
    pub fn trusted_proxies(mut self, proxies: impl IntoIterator<Item = IpNet>) -> Self {
        self.context().client_ip.set_trusted_proxies(proxies);
        self
    }

    /// The header the [trusted proxies](Self::trusted_proxies) write the
    /// client's address into (default
    /// [`RightmostXForwardedFor`](ClientIpSource::RightmostXForwardedFor)).
    /// Only that header is read, and only from a trusted proxy; see
    /// [`ClientIpSource`] for the rules.
    pub fn client_ip_source(mut self, source: ClientIpSource) -> Self {
        self.context().client_ip.source = source;
        self
    }

    /// How many leading bits of an IPv6 address make one client (default
    /// [`DEFAULT_IPV6_PREFIX`](crate::DEFAULT_IPV6_PREFIX), at most 128).
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.context().client_ip.ipv6_prefix = bits.min(128);
        self
    }

    /// How to find the user of a request, for limits `by = user`: typically
    /// reading what the application's authentication put in the extensions.
    /// `None` means "no user": the request is refused with
    /// [`missing_identity_status`](Self::missing_identity_status).
    pub fn user(
        mut self,
        resolve: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.context().user = Some(Arc::new(resolve));
        self
    }

    /// The status for a request without the identity its limit counts by (no
    /// user, no API key header). Default 401 Unauthorized. A gRPC call gets
    /// the matching gRPC status (`UNAUTHENTICATED` for 401,
    /// `PERMISSION_DENIED` for 403, `INVALID_ARGUMENT` for 400).
    pub fn missing_identity_status(mut self, status: StatusCode) -> Self {
        self.context().missing_identity = status;
        self
    }

    /// Whether allowed responses carry `RateLimit-Policy` and `RateLimit`
    /// (default on; 429s always carry them). They are what clients of the
    /// IETF draft read; switched off, an allowed request costs about 1,400
    /// fewer instructions (BENCHMARKS.md).
    pub fn rate_limit_headers(mut self, on: bool) -> Self {
        self.context().headers.on_allowed = on;
        self
    }

    /// The queues requests wait in ([`wait`](Self::wait)): their clock and
    /// how many may wait at once (by default [`Waiters::new`]: the system
    /// clock, [`DEFAULT_MAX_WAITERS`](crate::DEFAULT_MAX_WAITERS)).
    pub fn waiters(mut self, waiters: Waiters) -> Self {
        self.context().shared.waiters = waiters;
        self
    }

    /// Whether responses also carry the legacy `X-RateLimit-Limit`,
    /// `X-RateLimit-Remaining` and `X-RateLimit-Reset` (default off).
    pub fn legacy_headers(mut self, on: bool) -> Self {
        self.context().headers.legacy = on;
        self
    }
}

common_setters! {
    LimiterLayer, "every limit below";

    fn on_store_error;

    /// ```
    /// use limiter_tower::{Limiter, LimiterLayer, MemoryStore};
    ///
    /// // The monitoring network and the internal batch key pass every limit.
    /// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()))
    ///     .allow_ips(["10.20.0.0/16".parse()?])
    ///     .allow_identities(["batch-jobs"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn allow_ips;

    fn allow_identities;

    /// ```
    /// use limiter_tower::{Limiter, LimiterLayer, MemoryStore};
    ///
    /// let layer = LimiterLayer::new(Limiter::new(MemoryStore::new()))
    ///     .deny_ips(["198.51.100.0/24".parse()?])
    ///     .deny_identities(["spammer-42"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn deny_ips;

    fn deny_identities;

    fn shadow;

    fn wait;
}

impl Configure for LimiterLayer {
    fn plain_identities(&self) -> Option<crate::key::Source> {
        None
    }

    fn common(&mut self) -> &mut CommonOptions {
        self.context().options.get_or_insert_default()
    }

    fn set_on_store_error(&mut self, policy: OnStoreError) {
        self.context().shared.on_store_error = Some(policy);
        let config = GuardConfig {
            on_store_error: policy,
            ..self.context.guard
        };
        self.set_guard(config);
    }
}

impl<S> Layer<S> for LimiterLayer {
    type Service = LimiterService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LimiterService::new(inner, Arc::clone(&self.context))
    }
}
