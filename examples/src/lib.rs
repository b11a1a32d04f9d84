//! The UGC community server: users post, reply and like, with abuse limited
//! per user and per IP. `cargo run -p limiter-examples --bin ugc`.
//!
//! | route | limit |
//! |---|---|
//! | `POST /posts/{id}/replies` | 5 per 60 s per user (a request without a user gets 401); with `?wait=1`, waits up to 2 s instead of answering 429; 3 denials within 10 min block the user for 15 min (then 1 h on the next offence) |
//! | `POST /login` | body `{"user": "...", "password": "..."}`: 200 for the password `let-me-in`, 401 otherwise; at most 5 failed logins per client IP per 60 s and 5 per user per 15 min (successful logins never count); over either, every attempt gets 429 |
//! | `POST /posts` | 10 per 60 s and 20 per 120 s per client IP, no duplicate within 5 s |
//! | `POST /posts/{id}/likes` | token bucket per user: 1 token/s, burst 10 |
//! | `GET /feed` | GCRA per client IP: 100 per 60 s, 20 at once |
//! | `GET /trending` | 1,000 per second for all clients together, leased (each instance takes up to 50 permits per Redis call) |
//! | `GET /api/search` | per `x-api-key`, 30 per second across all regions (a request without a key gets 401) |
//! | `GET /search` | per `x-api-key`, by the key's plan: free 10 per 60 s, pro 100 per 60 s |
//! | `GET /me/limits` | not limited: the `x-user-id` user's own limits (replies, likes, failed logins) as a JSON array, one object per rule (`route`, `policy`, `limit`, `allowed`, `remaining`, `reset` in seconds), read without counting |
//! | `PUT /admin/plans/{key}` | not limited: the body `free` or `pro` changes the key's plan; only with [`Options::admin_token`] (404 without), each request `Authorization: Bearer <token>` (401 otherwise) |
//! | `GET /admin/limits/{kind}/{identity}` | as `/me/limits`, for any identity of its kind: `ip` (a client address), `user`, `key` (an `x-api-key` value: `GET /search` and `GET /api/search`), percent-encoded (admin) |
//! | `DELETE /admin/limits/{kind}/{identity}` | 204: every limit of that identity reset, on every instance's next request to the store (admin) |
//! | `GET /admin/blocks?after={key}&limit={n}` | the live blocks, a page at a time, each key naming its identity's kind, each block its origin (`operator`, `penalty`) (admin) |
//! | `GET /admin/blocks/{kind}/{identity}` | 200 `{"seconds": N}`, the block's time left, or 404 when not blocked (admin) |
//! | `PUT /admin/blocks/{kind}/{identity}` | body `{"seconds": N}`: 204, that identity blocked on every instance: an address on every limited route, a user or key on every limit keyed by it (admin) |
//! | `DELETE /admin/blocks/{kind}/{identity}` | 204: the block lifted (admin) |
//! | `PUT /admin/overrides/{limit}` | body `{"rules": [[2, "60s"]], "seconds": 3600}` (or `"mode": "shadow"`, `"off"`): 204, the limit (`posts-create_post`, as `/me/limits` and the keys name it) decided by the override on every instance until it ends; `GET /admin/overrides` lists them, `DELETE /admin/overrides/{limit}` ends one (admin; see docs/control.md) |
//! | `GET /admin/top/{limit}?n={n}` | the `n` identities the limit named `limit` (as its keys end: `posts-create_reply`) denied most in the last 5 to 10 minutes across the instances sharing the store, with each instance's counts' age (admin) |
//! | `POST /exports` | at most 2 in flight per user (each takes 500 ms) |
//! | `GET /health` | not limited |
//! | `GET /metrics` | not limited: the limiter's metrics, Prometheus text |
//!
//! With `LIMITER_REGION` ([`Options::regional`]), the admin routes reach
//! `GET /api/search`'s limit in the regional store too: its state is read
//! and reset there, and a block or an unblock goes to the server's store
//! and to every region (answered 503, naming the regions not reached, when
//! one did not confirm it; repeat the call to complete it).
//!
//! The `x-user-id` header stands in for real authentication. So
//! `GET /me/limits` answers whoever sends `x-user-id: alice` with alice's
//! limits, her failed logins included (how close an attacker has brought
//! her to the 15-minute lockout): a real service takes the user from its
//! own authentication. Networks in [`Options::allow`] bypass every limit;
//! [`Options::shadow`] puts every limit in shadow mode.
//!
//! The admin routes throttle token guessing: 10 failed authentications
//! (401) within 60 s from one client address, and that address's admin
//! requests get 429 until the window frees, the right token included
//! ([`admin::failed_authentications`]).
//!
//! `POST /login` counts failed logins per user under the name a person
//! means, not the bytes sent ([`login::normalise_user`]: NFKC, case folded,
//! trimmed), so `Alice` and `ａｌｉｃｅ` share `alice`'s 5 attempts.

use axum::Extension;
use axum::Json;
use axum::Router;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use std::net::IpAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use limiter_tower::{
    ClientIpSource, Control, GuardConfig, IpNet, Limiter, LimiterLayer, Region, RegionalStore,
    Store, Waiters,
};

use crate::admin::AdminToken;
use crate::business::PlanTable;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

pub mod admin;
pub mod body_deadline;
pub mod business;
pub mod demo;
#[cfg(doctest)]
mod guides;
pub mod login;
pub mod serve;
mod trending;

/// The header that names the logged-in user.
pub const USER_HEADER: &str = "x-user-id";

/// The user of a request: the `x-user-id` header, when it is UTF-8 text
/// (`小明` as well as `xiaoming`). Bytes that are not UTF-8 name no user:
/// such a request is refused as unauthenticated.
pub fn user_of(parts: &Parts) -> Option<String> {
    let value = parts.headers.get(USER_HEADER)?.as_bytes();
    let user = std::str::from_utf8(value).ok()?.trim();
    (!user.is_empty()).then(|| user.to_owned())
}

/// Posting, replying and liking: keys end in `posts-{handler}`.
mod posts {
    use axum::Json;
    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use limiter_tower::rate_limit;
    use serde_json::json;

    use crate::business::wants_to_wait;

    /// Replies: 5 per minute per user; a request with `?wait=1` waits up
    /// to 2 s for its retry time instead of being answered 429. Three
    /// denials within 10 minutes block the user for 15 minutes, then an
    /// hour on the next offence.
    #[rate_limit(
        rules = [(5, 60s)],
        by = user,
        wait = 2s,
        wait_when = wants_to_wait,
        penalty(after = 3, within = 10m, block = [15m, 1h])
    )]
    pub(crate) async fn create_reply(Path(post): Path<u64>) -> impl IntoResponse {
        (
            StatusCode::CREATED,
            Json(json!({ "post": post, "reply": "created" })),
        )
    }

    /// Posts: 10 per minute and 20 per two minutes per client, and the same
    /// client cannot post twice within 5 s.
    #[rate_limit(rules = [(10, 60s), (20, 120s)], by = ip, prevent_duplicate)]
    pub(crate) async fn create_post() -> impl IntoResponse {
        (StatusCode::CREATED, Json(json!({ "post": "created" })))
    }

    /// Likes: a token bucket per user, 1 token a second, 10 at most.
    #[rate_limit(algorithm = token_bucket(rate = 1/s, burst = 10), by = user)]
    pub(crate) async fn like(Path(post): Path<u64>) -> impl IntoResponse {
        Json(json!({ "post": post, "liked": true }))
    }
}

/// Reading: keys end in `feed-feed`.
mod feed {
    use axum::Json;
    use axum::response::IntoResponse;
    use limiter_tower::rate_limit;
    use serde_json::json;

    /// The feed: GCRA per client, 100 a minute on average, 20 at once.
    #[rate_limit(algorithm = gcra(rate = 100/60s, burst = 20), by = ip)]
    pub(crate) async fn feed() -> impl IntoResponse {
        Json(json!({ "posts": [] }))
    }
}

/// The API: keys end in `api-{handler}`.
mod api {
    use axum::Json;
    use axum::response::IntoResponse;
    use limiter_tower::rate_limit;
    use serde_json::json;

    /// Search: 30 a second per API key, one quota across every region
    /// when the route's store is regional.
    #[rate_limit(algorithm = fixed_window, rules = [(30, 1s)], by = header("x-api-key"))]
    pub(crate) async fn search() -> impl IntoResponse {
        Json(json!({ "results": [] }))
    }
}

/// The logged-in user's own limits, read without counting: one object per
/// rule (route, policy, limit, remaining, reset in seconds).
///
/// "Logged in" is the `x-user-id` stand-in: nothing proves the header, so
/// anyone who sends `x-user-id: alice` reads alice's limits, her count of
/// failed logins included. A real service names the user from its own
/// authentication (a session, a verified token) before showing this.
async fn my_limits(State(control): State<Control>, parts: Parts) -> axum::response::Response {
    let Some(user) = user_of(&parts) else {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "error": "no x-user-id" })),
        )
            .into_response();
    };
    match control.limits(&limiter_tower::Identity::user(&user)).await {
        Ok(states) => Json(states).into_response(),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": error.to_string() })),
        )
            .into_response(),
    }
}

async fn health() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// How the server is set up, beyond its store.
#[derive(Debug, Default)]
pub struct Options {
    /// Proxies whose forwarding header is believed.
    pub trusted_proxies: Vec<IpNet>,
    /// The header those proxies write the client's address into.
    pub client_ip_source: ClientIpSource,
    /// How a remote store is guarded (deadline, breaker, failure policy).
    pub guard: GuardConfig,
    /// When set, `GET /metrics` renders the process's metrics (Prometheus text).
    pub metrics: Option<PrometheusHandle>,
    /// When set, `GET /api/search` counts its quota across regions through
    /// this store; otherwise through the server's store.
    pub regional: Option<RegionalStore>,
    /// Clients (networks) that bypass every limit.
    pub allow: Vec<IpNet>,
    /// Every limit in shadow mode: checked and counted, never denying.
    pub shadow: bool,
    /// The queues of waiting requests (their clock); by default the system
    /// clock's.
    pub waiters: Option<Waiters>,
    /// The plan of each API key of `GET /search`.
    pub plans: PlanTable,
    /// The token of the admin routes (`PUT /admin/plans/{key}`): each
    /// request needs `Authorization: Bearer <token>`. Without one they are
    /// not mounted (404).
    pub admin_token: Option<AdminToken>,
    /// How often this instance publishes its top offenders for the others
    /// sharing the store (`GET /admin/top/{limit}` answers across them);
    /// by default every 5 s.
    pub publish_offenders_every: Option<Duration>,
    /// This instance's name among those sharing the store (top offenders
    /// are published under it); by default the host's name and the
    /// process id.
    pub instance_id: Option<String>,
}

/// The server's routes, limited through `limiter`'s store.
pub fn app<S: Store + Clone>(limiter: Limiter<S>, options: Options) -> Router {
    let Options {
        trusted_proxies,
        client_ip_source,
        guard,
        metrics,
        regional,
        allow,
        shadow,
        waiters,
        plans,
        admin_token,
        publish_offenders_every,
        instance_id,
    } = options;
    let business = |layer: LimiterLayer| {
        let layer = layer.allow_ips(allow.iter().copied()).shadow(shadow);
        match &waiters {
            Some(waiters) => layer.waiters(waiters.clone()),
            None => layer,
        }
    };
    let layer = LimiterLayer::new(limiter);
    let layer = match publish_offenders_every {
        Some(every) => layer.publish_offenders_every(every),
        None => layer,
    };
    let layer = business(
        layer
            .guard(guard)
            .trusted_proxies(trusted_proxies.iter().copied())
            .client_ip_source(client_ip_source)
            .user(user_of),
    );
    // Each user's own limits, which `GET /me/limits` shows them; an
    // administrator sees those of any identity.
    let control = match instance_id {
        Some(id) => layer.control().instance_id(id),
        None => layer.control(),
    };
    let mine = control
        .limit("POST /posts/{id}/replies", &posts::create_reply::limit())
        .limit("POST /posts/{id}/likes", &posts::like::limit())
        .limit("POST /login", &login::PER_USER);
    // `GET /api/search` across regions: a layer of its own on the route,
    // whose store (the innermost layer's) decides.
    let regional = regional.map(|store| {
        business(
            LimiterLayer::new(Limiter::new(store))
                .guard(guard)
                .trusted_proxies(trusted_proxies.iter().copied())
                .client_ip_source(client_ip_source),
        )
    });
    let every = mine
        .clone()
        .limit("POST /posts", &posts::create_post::limit())
        .limit("POST /login", &login::login::limit())
        .limit("GET /feed", &feed::feed::limit())
        .limit("GET /search", &business::search::limit());
    // The admin routes reach each limit through its own store: with
    // regions, `GET /api/search`'s blocks go to every region.
    let every = match &regional {
        Some(layer) => {
            every.merge((layer.control()).limit("GET /api/search", &api::search::limit()))
        }
        None => every.limit("GET /api/search", &api::search::limit()),
    };
    let router = match metrics {
        Some(handle) => {
            Router::new().route("/metrics", get(move || async move { handle.render() }))
        }
        None => Router::new(),
    };
    router
        .route("/posts/{id}/replies", post(posts::create_reply))
        .route("/posts", post(posts::create_post))
        .route("/login", post(login::login).with_state(mine.clone()))
        .route("/posts/{id}/likes", post(posts::like))
        .route("/feed", get(feed::feed))
        .route("/trending", get(trending::trending))
        .merge({
            let search = Router::new().route("/api/search", get(api::search));
            match regional {
                // The innermost layer's store decides: this route's own.
                Some(layer) => search.layer(layer),
                None => search,
            }
        })
        .route("/search", get(business::search))
        .route("/exports", post(business::export))
        .route("/me/limits", get(my_limits).with_state(mine))
        .merge(match admin_token {
            Some(token) => admin::protect(
                Router::new()
                    .route("/admin/plans/{key}", put(business::set_plan))
                    .nest("/admin", every.router()),
                token,
            ),
            None => Router::new(),
        })
        .route("/health", get(health))
        .layer(layer)
        // Each key's plan lives in the store: with Redis, every instance's.
        .layer(Extension(plans.share_through(every.clone()).clone()))
}

/// Parses `LIMITER_TRUSTED_PROXIES`: comma-separated networks in CIDR
/// notation or single addresses, empty for none.
pub fn parse_trusted_proxies(text: &str) -> Result<Vec<IpNet>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("{entry:?} is not an IP network (CIDR) nor an address"))
        })
        .collect()
}

/// Parses `LIMITER_CLIENT_IP_HEADER`: the header the trusted proxies write
/// (`x-forwarded-for`, `forwarded` or `x-real-ip`, any case).
pub fn parse_client_ip_header(text: &str) -> Result<ClientIpSource, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "x-forwarded-for" => Ok(ClientIpSource::RightmostXForwardedFor),
        "forwarded" => Ok(ClientIpSource::RightmostForwarded),
        "x-real-ip" => Ok(ClientIpSource::XRealIp),
        _ => Err(format!(
            "{text:?} is not a header the client address can be read from: \
             expected x-forwarded-for, forwarded or x-real-ip"
        )),
    }
}

/// Parses `LIMITER_PEER_REGIONS`: comma-separated `name=redis://...`, the
/// other regions and their Redis, empty for none.
pub fn parse_peer_regions(text: &str) -> Result<Vec<Region>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let (name, url) = entry
                .split_once('=')
                .ok_or_else(|| format!("{entry:?} is not name=redis://..."))?;
            Region::open(name.trim(), url.trim()).map_err(|e| e.to_string())
        })
        .collect()
}
